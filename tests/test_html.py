"""The HTML report without a browser: structure, escaping, self-containment, size, and re-rendering saved results."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dfdoctor.model import CheckRecord, Report, Status, Verdict
from dfdoctor.render import json_

from support.html_samples import SCRIPT_PAYLOAD, big_report, failed_launch, persistence_report


def html_render():
    """dfdoctor.render.html: imported by the tests, not at collection (test_collection_cost.py)."""
    from dfdoctor.render import html
    return html


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of <style> and <title>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.style = ""
        self._in: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        """Record the tag; track nesting for <style> text."""
        self.tags.append((tag, dict(attrs)))
        self._in.append(tag)

    def handle_endtag(self, tag):
        """Leave the innermost element."""
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        """Collect text (and the stylesheet)."""
        if self._in and self._in[-1] == "style":
            self.style += data
        self.text.append(data)


def parse(page: str) -> Tags:
    """The page's tags and text, as the standard library's HTML parser sees them."""
    t = Tags()
    t.feed(page)
    t.close()
    return t


def test_verdict_comes_first() -> None:
    page = html_render().render(failed_launch())
    summary = "The job died 0.41 s after start: ModuleNotFoundError: No module named &#39;flash_attn&#39;"
    assert summary in page
    first_card = page.index('class="card ')
    for piece in (summary, 'id="verdict-cause"', "missing-module", 'id="verdict-fix"',
                  "/opt/venv/bin/python3 -m pip install flash-attn==2.7.4", 'id="verdict-evidence"'):
        assert page.index(piece) < first_card, piece
    assert page.index('id="verdict"') < page.index('id="timeline"') < page.index('id="before-after"') \
        < page.index('id="checks"') < page.index('id="environment"')
    assert "<title>dfdoctor launch: FAILED [missing-module]" in page


def test_every_status_has_its_word_and_colour_class() -> None:
    rep = failed_launch()
    rep.checks = [CheckRecord(f"c.{s.value}", "pre", s, f"{s.value} summary") for s in Status]
    page = html_render().render(rep)
    for s in Status:
        assert f'<span class="badge st-{s.value}">{html_render().STATUS_WORDS[s.value]}</span>' in page
        assert f'class="card st-{s.value}"' in page


def test_injected_markup_is_escaped_everywhere() -> None:
    rep = failed_launch(stderr_extra=SCRIPT_PAYLOAD)
    rep.verdict.summary += SCRIPT_PAYLOAD
    rep.verdict.fix = "run `" + SCRIPT_PAYLOAD + "` now"
    rep.checks[0].title = SCRIPT_PAYLOAD
    rep.checks[0].data = {"rows": [{"x": SCRIPT_PAYLOAD}], "note": SCRIPT_PAYLOAD}
    rep.environment["evil"] = SCRIPT_PAYLOAD
    rep.timeline.append({"t": 1796220003.0, "event": SCRIPT_PAYLOAD, "detail": SCRIPT_PAYLOAD})
    rep.command.append(SCRIPT_PAYLOAD)
    page = html_render().render(rep)
    tags = parse(page)
    names = [t for t, _ in tags.tags]
    assert "script" not in names and "iframe" not in names and "img" not in names and "svg" not in names
    assert names.count("style") == 1 and names.count("link") == 1
    assert not [(t, a) for t, a in tags.tags for k in a if k.startswith("on")], "an event handler got through"
    assert "window.__pwned = 1" in "".join(tags.text)  # shown as text, not dropped


def test_self_contained_no_external_resources() -> None:
    page = html_render().render(persistence_report())
    tags = parse(page)
    for tag, attrs in tags.tags:
        for key in ("src", "href", "action", "srcset", "data", "poster"):
            if key in attrs:
                assert attrs[key].startswith("#") or attrs[key].startswith("data:"), (tag, attrs)
    assert "url(" not in tags.style and "@import" not in tags.style and "@font-face" not in tags.style


def test_content_security_policy_allows_only_our_style() -> None:
    page = html_render().render(failed_launch())
    tags = parse(page)
    meta = [a for t, a in tags.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(meta) == 1
    policy = meta[0]["content"]
    assert "default-src 'none'" in policy and "script-src" not in policy  # scripts fall back to 'none'
    digest = base64.b64encode(hashlib.sha256(tags.style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in policy, "the style hash must match the inlined stylesheet"


def test_light_dark_and_print_styles() -> None:
    css = parse(html_render().render(failed_launch())).style
    assert "@media (prefers-color-scheme: dark)" in css
    assert "@media print" in css


def test_rerendering_saved_results_gives_the_same_page() -> None:
    rep = failed_launch()
    saved = json_.render(rep)
    again = Report.from_dict(json.loads(saved))
    assert html_render().render(again) == html_render().render(rep)
    assert html_render().render(again, verbose=True) == html_render().render(rep, verbose=True)


def test_tables_from_check_data() -> None:
    page = html_render().render(persistence_report())
    tags = parse(page)
    assert 'id="t-pre-launch.path-hops"' in page and 'id="t-pre-persistence.session-matrix"' in page
    headers = [t for t, a in tags.tags if t == "th" and a.get("scope") == "col"]
    assert len(headers) >= 6 + 5  # hops: 6 columns, matrix: 5
    # booleans read as words, and each card links to its tables
    matrix = page[page.index('id="t-pre-persistence.session-matrix"'):]
    assert "<td>yes</td>" in matrix and "<td>no</td>" in matrix
    assert matrix.split("</figure>")[0].count("<tr>") == 1 + 6 and "more rows" not in page  # all rows shown
    assert 'href="#t-pre-launch.path-hops"' in page


def test_before_after_shows_what_post_found_new() -> None:
    page = html_render().render(failed_launch())
    section = page[page.index('id="before-after"'):page.index('id="checks"')]
    assert "found 2 problems the pre-launch checks did not" in section
    assert section.count('class="new"') == 2 and "job.alive" in section and "log.growing" in section
    assert "Before: 5 pre-launch checks" in section and 'href="#check-pre-deps.requirements"' in section
    assert "None of them predicted <code>missing-module</code>" in section
    rep = failed_launch()
    rep.checks[3].cause = "missing-module"
    assert "The pre-launch checks had already named the cause" in html_render().render(rep)
    # only one phase: no before/after section at all
    assert 'id="before-after"' not in html_render().render(persistence_report())


def test_problem_details_open_and_ok_details_closed() -> None:
    page = html_render().render(failed_launch())
    alive = page[page.index('id="check-post-job.alive"'):]
    assert alive.split("</article>")[0].count("<details open>") == 1
    reqs = page[page.index('id="check-pre-deps.requirements"'):].split("</article>")[0]
    assert "<details>" in reqs  # a warning: details there, folded
    assert html_render().render(failed_launch(), verbose=True).count("<details open") == \
        html_render().render(failed_launch(), verbose=True).count("<details")


def test_terminal_codes_and_control_characters_are_cleaned() -> None:
    page = html_render().render(failed_launch(stderr_extra="\x1b[31mred error\x1b[0m\x00nul\x07bell\r\n"))
    assert "\x1b" not in page and "\x00" not in page and "\x07" not in page
    assert "red error\u2400nul\u2407bell" in page


def test_100_checks_and_1_mib_of_output_stay_under_2_mb() -> None:
    for hostile in (False, True):
        rep = big_report(100, 1 << 20, hostile=hostile)
        page = html_render().render(rep)
        size = len(page.encode())
        assert size < 2_000_000, f"{size} bytes (hostile={hostile})"
        assert page.count('class="card ') == 100
        assert "trimmed here to keep this page small" in page  # and says so
    # the biggest output keeps its tail: that is where a traceback's last line is
    rep = big_report(100, 1 << 20)
    rep.checks[0].output += "RuntimeError: the last line matters\n"
    assert "RuntimeError: the last line matters" in html_render().render(rep)


def test_small_output_is_not_trimmed() -> None:
    page = html_render().render(failed_launch())
    assert "trimmed" not in page
    assert "from flash_attn import flash_attn_func" in page


def test_empty_and_minimal_reports_render() -> None:
    rep = Report("0.1.0", "local", [], "", "", Verdict("unknown"))
    page = html_render().render(rep)
    assert "No verdict was recorded." in page and "No checks ran." in page
    assert 'id="timeline"' not in page
    # a report as an older or foreign writer may save it: missing optional fields
    doc = {"schema": "dfdoctor/1", "verdict": {"state": "ok", "summary": "fine"},
           "checks": [{"id": "a.b", "status": "ok"}], "timeline": [{"event": "no time"}]}
    page = html_render().render(Report.from_dict(doc))
    assert "fine" in page and "a.b" in page and "no time" in page


def test_fix_backticks_become_copyable_code() -> None:
    assert str(html_render().fix_markup("run `pip install x<2` now")) == \
        'run <code class="copy">pip install x&lt;2</code> now'
    assert str(html_render().fix_markup("odd ` backtick <b>")) == "odd ` backtick &lt;b&gt;"
    # a fix that is one command is code as a whole; a sentence stays prose
    assert str(html_render().fix_markup("mkdir -p /tmp/h1/logs")) == '<code class="copy">mkdir -p /tmp/h1/logs</code>'
    assert str(html_render().fix_markup("./run.sh > log 2>&1")) == \
        '<code class="copy">./run.sh &gt; log 2&gt;&amp;1</code>'
    for prose in ("Install torch into the interpreter.", "mkdir the folder. Then run again",
                  "Install the distribution that provides 'torch' (e.g. pip install torch)", "note: do this"):
        assert "<code" not in str(html_render().fix_markup(prose)), prose


def test_clip_keeps_head_and_tail_within_budget() -> None:
    text = "".join(f"line {i}\n" for i in range(100_000))
    c = html_render().clip(text, 10_000)
    assert len(c["head"]) + len(c["tail"]) <= 10_000 and c["cut"] > 0
    assert c["head"].startswith("line 0\n") and c["tail"].endswith("line 99999\n")
    assert c["head"].endswith("\n") and c["tail"].startswith("line ")
    assert len(c["head"]) + len(c["tail"]) + c["cut"] == len(text)
    hostile = html_render().clip("<" * 100_000, 10_000)
    assert len(html_render().escape(hostile["head"] + hostile["tail"])) <= 10_000


@pytest.mark.parametrize("state,word", [("failed", "FAILED"), ("running", "RUNNING"), ("ok", "OK"),
                                        ("unknown", "UNKNOWN")])
def test_verdict_state_words(state: str, word: str) -> None:
    rep = failed_launch()
    rep.verdict.state = state
    page = html_render().render(rep)
    assert re.search(rf'<header class="verdict st-{state}" id="verdict">\s*<p class="kicker"><span class="badge '
                     rf'st-{state}">{word}</span>', page)


def test_cli_report_renders_saved_json_as_html(tmp_path: Path, dfdoctor) -> None:
    """`dfdoctor report RESULT.json --format html` gives the page `render` gives (after masking)."""
    from dfdoctor.redact import Redactor
    import os
    rep = failed_launch()
    saved = tmp_path / "result.json"
    saved.write_text(json_.render(rep))
    out = tmp_path / "report.html"
    res = dfdoctor("report", str(saved), "--format", "html", "--output", str(out))
    assert res.returncode == 1, res.stderr
    env = dict(os.environ, NO_COLOR="1")
    assert out.read_text() == html_render().render(Redactor.from_env(env).report(rep))


def test_fair_shares_give_small_texts_all_and_split_the_rest() -> None:
    shares = html_render().fair_shares([100, 5_000_000, 200, 3_000_000], total=10_000, cap=8_000, floor=500)
    assert shares[0] == 100 and shares[2] == 200
    assert shares[1] == shares[3] == (10_000 - 300) // 2
    assert html_render().fair_shares([10**6], total=10**6, cap=1000) == [1000]
    assert html_render().fair_shares([], 10, 10) == []


def test_every_kind_of_long_text_shares_the_size_budget() -> None:
    """100 checks, each with long details, data and output, and a 1 MiB output: still under 2 MB."""
    rep = big_report(100, 1 << 20, hostile=True)
    for i, c in enumerate(rep.checks):
        c.details = "<detail & more>\n" * 2000
        c.data = {"blob": ["<x>" * 50] * 400, "rows": [{"a": "<" * 400, "b": i}] * 300}
        c.evidence = ["<evidence line>" * 200] * 100
    page = html_render().render(rep)
    assert len(page.encode()) < 2_000_000, len(page.encode())


def test_long_tables_are_cut_and_say_so() -> None:
    rep = persistence_report()
    rep.checks[1].data["matrix"] = [{"strategy": f"s{i}", "survived": i % 2 == 0} for i in range(1000)]
    page = html_render().render(rep)
    matrix = page[page.index('id="t-pre-persistence.session-matrix"'):].split("</figure>")[0]
    assert matrix.count("<tr>") == 1 + html_render().TABLE_ROWS
    assert f"[… {1000 - html_render().TABLE_ROWS} more rows in the JSON result]" in matrix


def test_long_timelines_and_many_findings_are_cut_and_say_so() -> None:
    from dfdoctor.model import Result
    rep = failed_launch()
    rep.timeline = [{"t": 1796220000.0 + i, "event": "log-grew", "detail": f"{i} bytes"} for i in range(5000)]
    rep.timeline.append({"t": 1796230000.0, "event": "exit", "detail": "status 1"})
    rep.checks[0].findings = [Result(Status.OK, f"fine {i}") for i in range(300)] + [Result(Status.FAIL, "bad one")]
    page = html_render().render(rep)
    timeline = page[page.index('id="timeline"'):page.index("</ol>")]
    assert timeline.count("<li") == html_render().TIMELINE_MAX + 1
    assert f"{5001 - html_render().TIMELINE_MAX} more events in the JSON result" in timeline
    assert "status 1" in timeline and "0 bytes" in timeline  # the start and the end are kept
    card = page[page.index('id="check-pre-target.reach"'):].split("</article>")[0]
    assert "bad one" in card and "[… 251 more findings in the JSON result]" in card
