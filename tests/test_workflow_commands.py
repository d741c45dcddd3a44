"""No text dfdoctor did not write itself becomes a GitHub workflow command: whatever a path, an argument, a log
line or a summary holds, no line on stdout or stderr is read by the runner as `::cmd::` (or its older `##[cmd]`),
except dfdoctor's own annotations of `--format github`. Lines are judged the way the runner reads them: split at
\\r and \\n, leading whitespace stripped."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dfdoctor.engine import emit
from dfdoctor.model import CheckRecord, Report, Status, Verdict
from dfdoctor.render import FORMATS, render
from dfdoctor.render.findings import findings
from support.in_process import run_here

ROOT = Path(__file__).resolve().parent.parent
ATTACKS = ["\n::add-mask::leak", "\n::stop-commands::pwned", "\r::warning::x", "\n  \u00a0::error::x",
           "\n\u2003::set-output name=a::b", "##[set-env name=X;]y", "\n::debug::%0A::notice::z"]
PLACES = ["summary", "details", "output", "evidence", "fix", "verdict", "cause", "command", "target", "id",
          "log", "env"]


def runner_lines(text: str) -> list[str]:
    """The lines as GitHub's runner splits a step's output, each with .NET's leading whitespace stripped."""
    return [ln.lstrip() for ln in re.split(r"\r\n|\r|\n", text)]


def commands(text: str) -> list[str]:
    """Every line the runner would take as a workflow command, in either syntax."""
    return [ln for ln in runner_lines(text) if ln.startswith("::") or "##[" in ln]


def report_with(text: str, place: str) -> Report:
    rec = CheckRecord("imports.smoke" if place != "id" else "x." + text, "pre", Status.FAIL,
                      f"No module named 'yaml', imported at train{text}.py:3" if place == "summary" else "bad",
                      cause=text if place == "cause" else "missing-module", details=text if place == "details" else "",
                      fix=text if place == "fix" else "pip install pyyaml",
                      evidence=["e", text] if place == "evidence" else [], output=text if place == "output" else "",
                      target=text if place == "target" else None)
    verdict = Verdict("failed", text if place == "cause" else "missing-module",
                      text if place == "verdict" else "the job died", "fix it")
    return Report(tool_version="t", target=text if place == "target" else "local", started_at="", finished_at="",
                  verdict=verdict, checks=[rec], mode="launch",
                  command=["python", f"tr{text}ain.py"] if place == "command" else ["python", "train.py"],
                  environment={"SETTING": text} if place == "env" else {},
                  run={"dir": "/runs/x", "log": text} if place == "log" else {"dir": "/runs/x"})


def printed(report: Report, fmt: str, verbose: bool = False) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        emit(report, [(fmt, None)], verbose=verbose, env={})
    return out.getvalue()


def test_the_verdict_line_of_github_format_carries_no_command():
    """The defect: the last line (the verdict summary) was not escaped; a newline in it started a command."""
    rep = report_with("/tmp/x\n::add-mask::leak\n::stop-commands::pwned", "verdict")
    out = render(rep, "github")
    assert len(commands(out)) == len(findings(rep))  # only our annotations
    assert out.splitlines()[-1].startswith("dfdoctor launch: FAILED")


@settings(max_examples=120, deadline=None)
@given(attack=st.sampled_from(ATTACKS) | st.text(alphabet="\n\r :#[]%a\u00a0\u2028\u0085\t", max_size=24),
       prefix=st.text(max_size=8), place=st.sampled_from(PLACES), verbose=st.booleans())
def test_no_string_in_any_field_of_any_format_becomes_a_workflow_command(attack, prefix, place, verbose):
    os.environ.pop("GITHUB_STEP_SUMMARY", None)
    rep = report_with(prefix + attack, place)
    for fmt in FORMATS:
        out = printed(rep, fmt, verbose)
        found = commands(out)
        if fmt == "github":
            shown = min(len(findings(rep)), 10)
            assert len(found) == shown, (place, found)
            assert all(re.match(r"::(error|warning|notice) [^\r\n]*::", c) for c in found), found
        else:
            assert found == [], (fmt, place, found)


def test_a_usage_error_quoting_a_path_carries_no_command(dfdoctor, tmp_path):
    p = dfdoctor("check", "--log", "x", "--output", "a\n::add-mask::leak\n.unknownext", "--", "python3", "t.py",
                 cwd=tmp_path)
    assert p.returncode == 2
    assert commands(p.stdout + p.stderr) == [], p.stderr


def test_the_action_does_not_glob_expand_the_formats_input(tmp_path):
    """`formats: '*'` used to expand to the checkout's file names, which then landed inside an `::error` line."""
    (tmp_path / "evil::add-mask::x").write_text("")
    (tmp_path / "out").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env.update(INPUT_COMMAND="python3 train.py", INPUT_FORMATS="html *", INPUT_OUTPUT_DIR=str(tmp_path / "out"),
               GITHUB_OUTPUT=str(tmp_path / "gh-out"))
    p = subprocess.run(["bash", str(ROOT / "action" / "check.sh")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert "unknown format '*'" in p.stdout, p.stdout + p.stderr
    assert "evil" not in p.stdout
    assert "exit-code=2" in (tmp_path / "gh-out").read_text()


def test_sarif_locations_are_uris_a_viewer_reads_back_as_the_file():
    """The defect: `tr#ain.py` became the file `tr` with a fragment."""
    from urllib.parse import unquote, urlsplit
    import json as json_

    for name in ("tr#ain.py", "my run?.py", "50%.py", "dir with space/train.py", "/abs/tr#ain.py", "é.py"):
        rep = Report(tool_version="t", target="local", command=["python", name], started_at="", finished_at="",
                     verdict=Verdict("failed", "import-error", "died"),
                     checks=[CheckRecord("imports.smoke", "pre", Status.FAIL, f"died at {name}",
                                         cause="import-error")])
        doc = json_.loads(render(rep, "sarif"))
        uris = [loc["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]
                for loc in r.get("locations", [])]
        assert uris, name
        for uri in uris:
            parts = urlsplit(uri)
            assert not parts.fragment and not parts.query, uri
            assert unquote(parts.path).endswith(name.lstrip("/")), (uri, name)


def test_a_log_path_with_a_newline_gives_no_command_in_any_printed_format(dfdoctor, tmp_path):
    """A user-shaped case: a pull request's workflow passes a --log value with a newline and a command in it."""
    (tmp_path / "train.py").write_text("import no_such_module_here\n")
    log = "logs\n::add-mask::leak\n::stop-commands::pwned\n::warning::fake/train.log"  # its folder is quoted
    for fmt in ("github", "text", "json", "junit", "sarif", "gitlab"):
        # github's through the console script, the others through the same entry here (support/in_process)
        p = (dfdoctor if fmt == "github" else run_here)(
            "check", "--only", "log.writable", "--only", "imports.smoke", "--log", log, "--format", fmt,
            "--", "python3", "train.py", cwd=tmp_path)
        assert p.returncode in (0, 1), p.stderr
        found = commands(p.stdout + p.stderr)
        if fmt == "github":
            assert found and all(re.match(r"::(error|warning|notice) ", c) for c in found), found
            assert not any(re.match(r"::(add-mask|stop-commands|warning::fake)", c) for c in found)
        else:
            assert found == [], (fmt, found)
