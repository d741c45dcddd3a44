"""The HTML report: one self-contained page, verdict first, rendered only from the saved result model.

Everything shown comes from `Report` (so `dfdoctor report RESULT.json --format html` gives the same page), every
string goes through Jinja2's autoescaping, and a Content-Security-Policy forbids scripts and network requests as
a second wall. Long captured output is trimmed (head and tail kept, the cut said) so the page stays small.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import jinja2
from dfdoctor import __version__
from dfdoctor import templates as templates_package
from dfdoctor.model import PROBLEMS, CheckRecord, Report, Status
from dfdoctor.rows import differences
from dfdoctor.render import compiled
from dfdoctor.render.findings import fix_word
from dfdoctor.render.text import report_fixes
from markupsafe import Markup, escape

from dfdoctor.lazy_re import compile_later

TEMPLATES = Path(templates_package.__file__).resolve().parent

# Size budgets, in characters of escaped HTML, shared by all checks: 100 checks with 1 MiB of captured output
# stay well under 2 MB. Small texts get all they need; the big ones split what is left (see `fair_shares`).
OUTPUT_BUDGET, OUTPUT_MAX = 700_000, 200_000
DETAILS_BUDGET, DETAILS_MAX = 250_000, 32_000
DATA_BUDGET, DATA_MAX = 150_000, 24_000
EVIDENCE_BUDGET, EVIDENCE_MAX = 150_000, 16_000
TABLES_BUDGET, TABLE_MAX = 400_000, 120_000
VERDICT_EVIDENCE_MAX = 40_000
SHARE_FLOOR = 1_500  # however many checks there are, each keeps at least this much of its text
EVIDENCE_LINES = 60
TIMELINE_MAX = 200
FINDINGS_MAX = 50
LINE_MAX = 1_000
TABLE_ROWS = 200
CELL_MAX = 300
# Tables shown whole whatever the budget: a launch line's hops are few, and a cut one hides where the line broke
WHOLE_TABLES = ("hops",)

STATE_WORDS = {"ok": "OK", "running": "RUNNING", "failed": "FAILED", "unknown": "UNKNOWN"}
STATUS_WORDS = {"ok": "OK", "skip": "SKIP", "warn": "WARN", "fail": "FAIL", "timeout": "TIMEOUT", "error": "ERROR"}
ENV_FIRST = ("host", "target", "os", "training_python", "python", "torch", "cuda", "cuda_driver", "gpus",
             "dfdoctor_python", "cwd")

_ANSI = compile_later(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# HTML cannot show most C0 controls (and NUL breaks parsers): make them visible instead.
_CONTROLS = {i: 0x2400 + i for i in range(32) if i not in (9, 10, 13)}
_CONTROLS[0x7F] = 0x2421


def clean(s: Any) -> Any:
    """A string without terminal colour codes, with control characters made visible; other values unchanged."""
    if not isinstance(s, str) or isinstance(s, Markup):
        return s
    if "\x1b" in s:
        s = _ANSI.sub("", s)
    return s.translate(_CONTROLS).replace("\r\n", "\n")


def clip(text: str, budget: int) -> dict[str, Any]:
    """Head and tail of `text` within `budget` escaped characters: the tail matters most (tracebacks end there)."""
    text = clean(text or "")
    escaped = len(escape(text))
    if escaped <= budget:
        return {"head": text, "tail": "", "cut": 0, "lines": 0}
    ratio = escaped / max(len(text), 1)  # '<' becomes '&lt;': trim by what the page will weigh
    keep = max(int(budget / ratio), 200)
    head_n = keep // 4
    tail_n = keep - head_n
    head, tail = text[:head_n], text[-tail_n:]
    # Cut at line boundaries when one is near, so lines are not shown half.
    nl = head.rfind("\n")
    head = head[:nl + 1] if nl > head_n // 2 else head
    nl = tail.find("\n")
    tail = tail[nl + 1:] if 0 <= nl < tail_n // 2 else tail
    cut = len(text) - len(head) - len(tail)
    return {"head": head, "tail": tail, "cut": cut, "lines": text.count("\n", len(head), len(text) - len(tail))}


def lines_within(lines: list[Any], budget: int) -> tuple[list[str], int]:
    """The first evidence lines that fit `budget` escaped characters (each line capped), and how many were left out."""
    kept: list[str] = []
    used = 0
    for raw in lines[:EVIDENCE_LINES]:
        line = clean(str(raw))
        line = line if len(line) <= LINE_MAX else line[:LINE_MAX - 1] + "…"
        used += len(escape(line)) + 1
        if used > budget and kept:
            break
        kept.append(line)
    return kept, len(lines) - len(kept)


_COMMAND = compile_later(r"[a-z0-9_./~$-][\w./~$=-]*(?:\s|$)")


def looks_like_command(text: str) -> bool:
    """Whether a whole fix is one shell command (`mkdir -p logs`) rather than a sentence."""
    t = text.strip()
    return (bool(t) and "\n" not in t and len(t) <= 400 and bool(_COMMAND.match(t)) and not t.endswith(".")
            and ". " not in t and ": " not in t)


def fix_markup(fix: str) -> Markup:
    """The fix text, escaped, with `backticked` parts (or a fix that is one command) as code to copy."""
    if "`" not in (fix or "") and looks_like_command(clean(fix or "")):
        return Markup('<code class="copy">{}</code>').format(clean(fix).strip())
    parts = clean(fix or "").split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: show it as written
        return Markup(escape(clean(fix)))
    out = []
    for i, part in enumerate(parts):
        out.append(Markup('<code class="copy">{}</code>').format(part) if i % 2 else escape(part))
    return Markup("").join(out)


def fmt_duration(seconds: Optional[float]) -> str:
    """0.004 s, 1.2 s, 3 min 05 s."""
    if seconds is None:
        return ""
    if seconds <= 0:
        return "0 s"
    if seconds < 10:
        return f"{seconds:.3g} s" if seconds >= 0.001 else "<1 ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def fmt_offset(seconds: float) -> str:
    """A time since the timeline's first event, in milliseconds as its clock column is: 0.004 s, 1.200 s,
    3 min 05.000 s (fmt_duration's three significant digits gave 0.004 s beside 12.3 s and 3.45 s)."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.3f} s"
    return f"{int(seconds // 60)} min {seconds % 60:06.3f} s"


def fmt_cell(v: Any, cap: int = CELL_MAX) -> str:
    """A table cell: yes/no for booleans, compact JSON for nested values, capped."""
    if v is None:
        s = ""
    elif isinstance(v, bool):
        s = "yes" if v else "no"
    elif isinstance(v, float):
        s = f"{v:.4g}"
    elif isinstance(v, (dict, list, tuple)):
        s = json.dumps(v, ensure_ascii=False, default=str)
    else:
        s = str(v)
    s = clean(s)
    return s if len(s) <= cap else s[:cap - 1] + "…"


def is_table(v: Any) -> bool:
    """A non-empty list of dicts: rendered as a table."""
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _cells(rows: list[dict[str, Any]], cap: int = CELL_MAX) -> tuple[list[str], list[list[str]], list[int]]:
    """Columns (union of keys, in order of first appearance), formatted rows, and each row's weight on the page."""
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    cells = [[fmt_cell(r.get(c), cap) for c in cols] for r in rows[:TABLE_ROWS]]
    # '<td></td>' per cell and '<tr></tr>\n' per row
    return cols, cells, [sum(len(escape(c)) + 9 for c in row) + 10 for row in cells]


def table(rows: list[dict[str, Any]], budget: int = TABLE_MAX, whole: bool = False) -> dict[str, Any]:
    """A table of as many rows as fit `budget` (`whole`: every row, each cell in full)."""
    cols, cells, weights = _cells(rows, 1 << 30 if whole else CELL_MAX)  # whole: never a cell cut
    budget = sum(weights) if whole else budget
    shown: list[list[str]] = []
    used = 0
    for row, weight in zip(cells, weights):
        used += weight
        if used > budget and shown:
            break
        shown.append(row)
    return {"cols": cols, "rows": shown, "more": len(rows) - len(shown)}


def table_size(rows: list[dict[str, Any]]) -> int:
    """What a table's rows weigh on the page untrimmed (at most TABLE_ROWS rows of capped cells)."""
    return sum(_cells(rows)[2])


def slug(*parts: str) -> str:
    """An HTML id from parts."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", p) for p in parts)


def check_anchor(rec: CheckRecord) -> str:
    """The id of a check's card: per target in a report over many."""
    return slug("check", rec.phase, rec.id, *((rec.target,) if rec.target else ()))


# Within a heading: failures first, then warnings, then ok, then the skipped ones (folded by the template); the
# checks' own order within each. Alphabetically, three skipped cards had come before the one that failed.
_CARD_ORDER = {Status.FAIL: 0, Status.ERROR: 0, Status.TIMEOUT: 0, Status.WARN: 1, Status.OK: 2, Status.SKIP: 3}


def check_groups(report: Report) -> list[tuple[str, list[CheckRecord]]]:
    """The checks under their headings: by phase, and over many targets by target then phase; failures first."""
    groups = _check_groups(report)
    return [(h, sorted(recs, key=lambda c: _CARD_ORDER.get(c.status, 2))) for h, recs in groups]


def _check_groups(report: Report) -> list[tuple[str, list[CheckRecord]]]:
    phases = sorted({c.phase for c in report.checks}, key=lambda p: (p != "pre", p))
    words = {"pre": "Pre-launch checks", "post": "Post-launch checks"}
    if not report.targets:
        return [(words.get(p, f"{p} checks"), [c for c in report.checks if c.phase == p]) for p in phases]
    groups = []
    for row in report.targets:
        for p in phases:
            recs = [c for c in report.checks if c.target == row.target and c.phase == p]
            if recs:
                groups.append((f"{row.target}: {words.get(p, p + ' checks').lower()}", recs))
    return groups


def target_matrix(report: Report) -> Optional[dict[str, Any]]:
    """Over many targets: one row per target, one column per check, the cells that differ from the usual
    outcome of their column marked; then what differs, in sentences."""
    if not report.targets:
        return None
    diffs = differences(report)
    odd = {(d.key, t) for d in diffs if d.what == "check" for t, _ in d.outliers}
    cols: list[tuple[str, str]] = []
    for c in report.checks:
        if (c.phase, c.id) not in cols:
            cols.append((c.phase, c.id))
    labels = [cid if phase == "pre" else f"{cid} ({phase})" for phase, cid in cols]
    rows = []
    for row in report.targets:
        mine = {(c.phase, c.id): c for c in report.checks_of(row.target)}
        cells = []
        for (phase, cid), label in zip(cols, labels):
            rec = mine.get((phase, cid))
            cells.append({"rec": rec, "anchor": check_anchor(rec) if rec else "",
                          "word": STATUS_WORDS[rec.status.value] if rec else "",
                          "odd": (label, row.target) in odd})
        rows.append({"row": row, "word": STATE_WORDS.get(row.verdict.state, row.verdict.state.upper()),
                     "cells": cells, "duration": fmt_duration(row.duration_s)})
    return {"cols": labels, "rows": rows, "diffs": [d.sentence() for d in diffs]}


def clock(t: Any) -> str:
    """An epoch time as HH:MM:SS.mmm UTC."""
    try:
        return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


_BAD_EVENTS = frozenset({"exit", "exited", "died", "death", "killed", "signal", "signalled", "crashed", "timeout",
                         "failed", "oom", "oom-killed", "hang", "error"})


def _is_bad(event: dict[str, Any]) -> bool:
    """Whether a timeline event marks the job's end or a failed verdict (drawn in the failure colour)."""
    name = str(event.get("event", "")).lower()
    detail = str(event.get("detail") or "").lower()
    if name == "exit":
        return not re.match(r"status 0\b", detail)
    return name in _BAD_EVENTS or (name == "verdict" and detail.startswith("failed"))


def timeline_rows(timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with their time since the first event and their wall clock."""
    times = [e.get("t") for e in timeline if isinstance(e.get("t"), (int, float))]
    t0 = min(times) if times else None
    rows: list[dict[str, Any]] = []
    half = TIMELINE_MAX // 2
    for i, e in enumerate(timeline):
        if len(timeline) > TIMELINE_MAX and half <= i < len(timeline) - half:
            if i == half:  # a long watch writes many events: keep how it began and how it ended
                rows.append({"offset": "", "clock": "", "event": "…", "bad": False, "extra": "",
                             "detail": f"{len(timeline) - 2 * half} more events in the JSON result"})
            continue
        t = e.get("t")
        extra = {k: v for k, v in e.items() if k not in ("t", "event", "detail")}
        rows.append({"offset": f"+{fmt_offset(t - t0)}" if t0 is not None and isinstance(t, (int, float))
                     else "", "clock": clock(t), "event": clean(str(e.get("event", ""))),
                     "detail": clean(str(e.get("detail") or "")),
                     "extra": fmt_cell(extra) if extra else "",
                     "bad": _is_bad(e)})
    return rows


def before_after(report: Report) -> Optional[dict[str, Any]]:
    """What the pre-launch checks saw, against what the launch and the post-launch checks found.

    None for `check` (nothing was launched) or when no pre-launch check ran.
    """
    checks = report.checks
    pre = {c.id: c for c in checks if c.phase == "pre"}
    post = [c for c in checks if c.phase == "post"]
    if report.mode == "check" or not pre:
        return None
    rows = []
    for c in post:
        before = pre.get(c.id)
        new = c.status.rank >= Status.WARN.rank and (before is None or before.status.rank < c.status.rank)
        changed = before is not None and before.status != c.status
        if new or changed or c.status.rank >= Status.WARN.rank:
            rows.append({"id": c.id, "before": before, "after": c, "new": new})
    pre_problems = [c for c in pre.values() if c.status.rank >= Status.WARN.rank and not c.silenced]
    return {"rows": rows, "new": sum(1 for r in rows if r["new"]), "pre_n": len(pre), "post_n": len(post),
            "pre_problems": sorted(pre_problems, key=lambda c: -c.status.rank)[:8],
            "pre_more": max(0, len(pre_problems) - 8),
            "pre_cause_matches": bool(report.verdict.cause) and any(c.cause == report.verdict.cause
                                                                   for c in pre_problems)}


def fair_shares(sizes: list[int], total: int, cap: int, floor: int = SHARE_FLOOR) -> list[int]:
    """Budgets for texts of these sizes sharing `total`: the small ones get all they need, the rest split the rest."""
    out = [0] * len(sizes)
    left = total
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for k, i in enumerate(order):
        fair = max(floor, left // (len(sizes) - k))
        out[i] = min(sizes[i], cap, fair)
        left -= out[i]
    return out


def data_json(rec: CheckRecord) -> str:
    """The check's data other than its tables, as indented JSON ('' when there is none)."""
    rest = {k: v for k, v in rec.data.items() if not is_table(v)}
    return json.dumps(rest, indent=1, ensure_ascii=False, default=str) if rest else ""


def card(rec: CheckRecord, budgets: dict[str, int], verbose: bool) -> dict[str, Any]:
    """One check's card: status, summary, and what goes in its collapsible details."""
    where = (rec.target,) if rec.target else ()
    tables = [(k, slug("t", rec.phase, rec.id, *where, k)) for k, v in rec.data.items() if is_table(v)]
    rest_json = data_json(rec)
    evidence, evidence_more = lines_within(rec.evidence, budgets["evidence"])
    problem = rec.status in PROBLEMS or rec.status == Status.WARN
    findings = [f for f in rec.findings if (f.summary, f.status) != (rec.summary, rec.status)]
    findings.sort(key=lambda f: -f.status.rank)  # worst first, so a cut keeps what matters
    return {
        "rec": rec, "anchor": check_anchor(rec), "word": STATUS_WORDS[rec.status.value],
        "problem": problem, "duration": fmt_duration(rec.duration_s),
        "fix": fix_markup(rec.fix) if rec.fix and problem else None,
        "details": clip(rec.details, budgets["details"]) if rec.details else None,
        "evidence": evidence, "evidence_more": evidence_more,
        "findings": findings[:FINDINGS_MAX], "findings_more": max(0, len(findings) - FINDINGS_MAX),
        "tables": tables,
        "data_json": clip(rest_json, budgets["data"]) if rest_json else None,
        "output": clip(rec.output, budgets["output"]) if rec.output else None,
        "open": verbose or (rec.status in PROBLEMS and not rec.silenced),
        "has_more": bool(rec.details or evidence or findings or tables or rest_json or rec.output),
    }


def budgets(checks: list[CheckRecord]) -> list[dict[str, int]]:
    """Each check's share of the page's budget for output, details and data."""
    def sizes(texts: list[str]) -> list[int]:
        return [len(escape(clean(t))) if t else 0 for t in texts]

    out = fair_shares(sizes([c.output for c in checks]), OUTPUT_BUDGET, OUTPUT_MAX)
    det = fair_shares(sizes([c.details for c in checks]), DETAILS_BUDGET, DETAILS_MAX)
    dat = fair_shares(sizes([data_json(c) for c in checks]), DATA_BUDGET, DATA_MAX)
    evi = fair_shares([sum(min(len(str(e)), LINE_MAX) + 1 for e in c.evidence[:EVIDENCE_LINES]) for c in checks],
                      EVIDENCE_BUDGET, EVIDENCE_MAX)
    return [{"output": o, "details": d, "data": a, "evidence": e} for o, d, a, e in zip(out, det, dat, evi)]


def env_rows(env: dict[str, Any]) -> list[tuple[str, str]]:
    """The environment as key/value rows, the facts people ask for first."""
    keys = [k for k in ENV_FIRST if k in env] + sorted(k for k in env if k not in ENV_FIRST)
    return [(k, fmt_cell(env[k]) if not isinstance(env[k], str) else clean(env[k])) for k in keys]


RUN_FIRST = ("id", "dir", "pid", "exit_code", "signal", "log")
RUN_NOTES = ("chosen", "as_of")  # sentences shown beside the verdict, not rows of facts


def run_rows(run: dict[str, Any], rest: bool = False) -> list[tuple[str, str]]:
    """The run facts people look for (or, with `rest`, the others), as label/value pairs, empties left out."""
    keys = [k for k in run if k not in RUN_FIRST and k not in RUN_NOTES] if rest else \
        [k for k in RUN_FIRST if k in run]
    return [(k.replace("_", " "), clean(run[k]) if isinstance(run[k], str) else fmt_cell(run[k]))
            for k in keys if run[k] not in (None, "", [], {})]


def counts(checks: list[CheckRecord]) -> list[tuple[str, str, int]]:
    """(status, word, count) for every status present, worst first."""
    seen: dict[str, int] = {}
    for c in checks:
        seen[c.status.value] = seen.get(c.status.value, 0) + 1
    order = sorted(seen, key=lambda s: -Status(s).rank)
    return [(s, STATUS_WORDS[s], seen[s]) for s in order]


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """The Jinja2 environment: the `dfdoctor.templates` package, autoescaping on, strict about names."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=clean)
    env.filters["duration"] = fmt_duration
    env.filters["fix"] = fix_markup
    env.globals["slug"] = slug
    env.bytecode_cache = compiled.KeptCode(TEMPLATES / "__pycache__", compiled.options_key(env))  # see compiled.py
    return env


def prepare() -> None:
    """Compile the page's templates now (a launch does it while it watches the job: at the report, compiling
    them took 0.2-0.3 s between the verdict and dfdoctor's return, issue 45)."""
    env = _environment()
    env.get_template("report.css")
    env.get_template("report.html.j2")


def keep_compiled() -> None:
    """Compile the page's templates into templates/__pycache__, where every later dfdoctor reads them (`make test`
    runs it, as it runs compileall)."""
    env = _environment()
    env.bytecode_cache = compiled.KeptCode(TEMPLATES / "__pycache__", compiled.options_key(env), write=True)
    prepare()


def csp(css: str) -> str:
    """A policy that allows exactly our own stylesheet: no scripts, no fetches, no frames, no forms."""
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    return (f"default-src 'none'; style-src 'sha256-{digest}'; img-src data:; base-uri 'none'; "
            "form-action 'none'")


def render(report: Report, verbose: bool = False) -> str:
    """The whole page as one string."""
    env = _environment()
    css = env.get_template("report.css").render()
    shares = dict(zip(map(id, report.checks), budgets(report.checks)))
    v = report.verdict
    found = [(c, k, val) for c in report.checks for k, val in c.data.items() if is_table(val)]
    table_shares = fair_shares([table_size(val) for _, _, val in found], TABLES_BUDGET, TABLE_MAX)
    tables = [{"anchor": slug("t", c.phase, c.id, *((c.target,) if c.target else ()), k), "check": c,
               "check_anchor": check_anchor(c), "key": k, "table": table(val, share, k in WHOLE_TABLES)}
              for (c, k, val), share in zip(found, table_shares)]
    evidence, evidence_more = lines_within(v.evidence, VERDICT_EVIDENCE_MAX)
    return env.get_template("report.html.j2").render(
        r=report, v=v, verbose=verbose, css=Markup(css), csp=csp(css),
        state_word=STATE_WORDS.get(v.state, v.state.upper()),
        command=shlex.join(str(a) for a in report.command) if report.command else "",
        command_as_typed=report.command_as_typed,
        fixes=[fix_markup(f) for f in report_fixes(report)], fix_label=fix_word(v.state).capitalize(),
        evidence=evidence, evidence_more=evidence_more,
        timeline=timeline_rows(report.timeline), before_after=before_after(report),
        groups=[(h, [card(c, shares[id(c)], verbose) for c in recs if c.status != Status.SKIP],
                 [card(c, shares[id(c)], verbose) for c in recs if c.status == Status.SKIP])
                for h, recs in check_groups(report)],
        matrix=target_matrix(report),
        counts=counts(report.checks), env_rows=env_rows(report.environment), tables=tables,
        run=run_rows(report.run), run_more=run_rows(report.run, rest=True),
        status_words=STATUS_WORDS, generator=f"dfdoctor {report.tool_version or __version__}",
    )
