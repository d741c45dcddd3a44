"""The terminal view: the verdict first, then a table of checks; colour only where it helps."""

from __future__ import annotations

import dataclasses
import enum
import os
import textwrap
from typing import Any, Optional

from dfdoctor.model import OBSERVED, CheckRecord, Report, Status
from dfdoctor.render.findings import fix_word
from dfdoctor.rows import differences, row_counts
from dfdoctor.lazy_re import compile_later

# Every C0 and C1 control but newline and tab, and DEL: what lets a job's bytes repaint a terminal, ring it,
# move the cursor back over a line (CR) or fake a verdict in colour. Shown as \xNN escapes instead.
_CONTROL = compile_later(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_COLOURS = {"ok": "32", "skip": "2", "warn": "33", "fail": "31", "timeout": "35", "error": "35",
            "running": "32", "failed": "31", "unknown": "33"}
_MARKS = {"ok": "ok", "skip": "skip", "warn": "WARN", "fail": "FAIL", "timeout": "TIMEOUT", "error": "ERROR"}


def visible(text: str) -> str:
    """`text` with its control characters written out as `\\xNN` escapes (newline and tab kept)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _visible_all(obj: Any) -> Any:
    """A copy of a report (or any part of one) with `visible` applied to every string in it."""
    if isinstance(obj, enum.Enum):
        return obj
    if isinstance(obj, str):
        return visible(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_visible_all(x) for x in obj)
    if isinstance(obj, dict):
        return {_visible_all(k): _visible_all(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _visible_all(getattr(obj, f.name))
                                           for f in dataclasses.fields(obj) if f.init})
    return obj


def color_wanted(stream: Any) -> bool:
    """Colour on a terminal; FORCE_COLOR (non-empty) asks for it elsewhere too (CI logs that render it); NO_COLOR
    (non-empty, no-color.org) and TERM=dumb turn it off, whatever else says (NO_COLOR first, as pytest)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _paint(text: str, key: str, color: bool, bold: bool = False) -> str:
    if not color:
        return text
    code = _COLOURS.get(key, "0")
    return f"\x1b[{'1;' if bold else ''}{code}m{text}\x1b[0m"


def render(report: Report, verbose: bool = False, color: bool = False, quiet: bool = False) -> str:
    """Verdict, then one line per finding of every check (details and durations with `verbose`; only the
    verdict line with `quiet`); control characters in what the report quotes (a job's output, a path) are shown
    escaped, so only our own colour codes reach the terminal."""
    report = _visible_all(report)
    if quiet:
        return _paint(quiet_line(report), report.verdict.state, color, bold=True) + "\n"
    import shutil  # the full text's alone: a quiet line, JSON and `report -q` ask no terminal its width (issue 45)
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))
    out: list[str] = []
    v = report.verdict
    if report.run.get("chosen"):  # whose run this is comes before what became of it
        out.extend(textwrap.wrap(report.run["chosen"], width, break_long_words=False, break_on_hyphens=False))
    out.append(_paint(f"dfdoctor {report.mode}: {_head(report)}", v.state, color, bold=True))
    # `check` on one target: the verdict's evidence is the rows below, said once there, not three times
    from_rows = report.mode == "check" and not report.targets
    summary = v.summary.split("; first: ")[0] if from_rows else v.summary
    if summary:
        out.extend(textwrap.wrap(summary, width, initial_indent="  ", subsequent_indent="  ",
                                   break_long_words=False, break_on_hyphens=False))  # a path stays whole)
    if report.run.get("as_of"):  # a saved verdict of a job that may have changed since
        out.extend(textwrap.wrap(report.run["as_of"], width, initial_indent="  ", subsequent_indent="  ",
                                 break_long_words=False, break_on_hyphens=False))
    if not from_rows:
        for line in v.evidence[:8]:
            out.append("  | " + line)
    raw = fix_sources(report)
    fixes = report_fixes(report)
    label = fix_word(v.state) + ": "
    pad = "  " + " " * len(label)
    for i, line in enumerate(ln for fix in fixes for ln in fix.splitlines() if ln.strip()):
        # a fix of several lines (a line to run first, the line, what changed): each its own, what changed indented
        shown = ("  " + line) if line.startswith("changed: ") else line
        out.append(_paint("  " + label, "warn", color) + shown if i == 0 else pad + shown)
    if report.run.get("dir"):
        out.append(f"  run: {report.run.get('dir')}")
    if report.environment.get("config"):
        out.append(f"  config: {report.environment['config']}")
    for skipped in report.environment.get("config_skipped") or ():
        out.append(f"  config not used: {skipped}")
    if report.targets:
        out.extend(_rows(report, width, verbose, color))
    elif report.checks:
        out.append("")
        idw = max(len(c.id) for c in report.checks)
        said = set(raw)  # a fix said above (alone or within a combined one) is not said again
        # a finding the verdict's summary already quotes (a blocked launch's) is not said again in its row
        above = "" if from_rows else " ".join(summary.split())
        skipped = 0
        for rec in report.checks:
            if rec.status == Status.SKIP and not verbose:
                skipped += 1
                continue
            out.extend(_check_lines(rec, idw, width, verbose, color, said=said, above=above))
        if skipped:
            out.append(_paint(f"{skipped} skipped: -v says why", "skip", color))
    return "\n".join(out) + "\n"


def fix_sources(report: Report) -> list[str]:
    """The fixes the verdict's fix lines are made of: for `check` on one target every problem's, failures before
    warnings (what blocks the launch is mended first); else the verdict's own."""
    v = report.verdict
    if report.mode == "check" and not report.targets:
        # the headline's fix first; each other failure's labelled with the check whose finding it fixes; a
        # warning's advice stays under that warning's row (issue 39: six fix lines buried the one that mattered)
        worst_first = sorted(report.checks, key=lambda r: (r.silenced is None, r.status.rank), reverse=True)
        problems = [rec for rec in worst_first if rec.status.rank > Status.WARN.rank and rec.silenced is None]
        if not problems:  # the next steps: what this launch meets (an import it never reaches is no step of it)
            return [f for rec in worst_first for f in _fixes(rec, reached_only=True)]
        head = [v.fix] if v.fix else []
        return head + [f for rec in problems for f in _failure_fixes(rec) if f not in head]
    if report.mode == "launch" and v.state == "failed" and not report.targets and not (report.run or {}).get("pid"):
        # refused before the start: every blocker's fix, the headline's first (two missing modules were mended
        # one launch at a time)
        blockers = [r for r in report.checks if r.status.rank >= Status.FAIL.rank and r.silenced is None]
        return ([v.fix] if v.fix else []) + [f for rec in blockers for f in _fixes(rec)]
    return [v.fix] if v.fix else []


def report_fixes(report: Report) -> list[str]:
    """The fix lines under the verdict, each once, `pip install` lines into one interpreter merged (every
    format that shows the verdict's fix shows these)."""
    v = report.verdict
    return _labelled(report, combined_fixes(fix_sources(report))) or ([v.fix] if v.fix else [])


def _labelled(report: Report, fixes: list[str]) -> list[str]:
    """`check`'s fix lines after the headline's, each that is one failure's own fix labelled with its check, as a
    note after the command (`mkdir -p logs   (for log.writable)`): the line stays one to paste."""
    if report.mode != "check" or report.targets or not fixes:
        return fixes
    owner = {}
    for rec in report.checks:
        if rec.status.rank > Status.WARN.rank and rec.silenced is None:
            for f in _failure_fixes(rec):
                owner.setdefault(f.strip(), rec.id)
    first = fixes[0]
    return [first] + [f"{f}   (for {owner[f]})" if f in owner and "\n" not in f and not _NOTE.search(f) and
                      owner[f] != owner.get(first) else f for f in fixes[1:]]


def _head(report: Report) -> str:
    v = report.verdict
    head = {"ok": "OK", "running": "RUNNING", "failed": "FAILED", "unknown": "UNKNOWN"}.get(v.state, v.state.upper())
    return head + (f" [{v.cause}]" if v.cause else "")


def verdict_line(report: Report) -> str:
    """The verdict in one line, for `-q` and for a terminal whose report went to files only."""
    v = report.verdict
    summary = v.summary.split("; first: ")[0] if report.mode == "check" and not report.targets else v.summary
    summary = " ".join((summary or "").split())
    summary = _BELOW.sub(r"\1)", summary)  # the line stands alone: nothing is below it
    return f"dfdoctor {report.mode}: {_head(report)}" + (f": {summary}" if summary else "")


def quiet_line(report: Report) -> str:
    """`-q`'s one line: the verdict, the run's id (where the job started), and the first fix or next step (how
    many more, when there are; the full report has them)."""
    line = verdict_line(report).rstrip(".")
    if report.run.get("as_of"):
        line += ". " + report.run["as_of"].rstrip(".")
    if report.run.get("id"):
        line += f"; run {report.run['id']}"
    fixes = [_pasted(f) for f in report_fixes(report)]
    if fixes:
        more = f" (and {len(fixes) - 1} more)" if len(fixes) > 1 else ""
        line += f"; {fix_word(report.verdict.state)}: {fixes[0]}{more}"
    return line


def _pasted(fix: str) -> str:
    """A fix as one line: its lines to run first and the line, joined by `&&` so that it pastes as one; what
    changed is left to the full report."""
    lines = [ln for ln in fix.splitlines() if ln.strip() and not ln.startswith("changed: ")]
    lines = [ln[len("run first: "):] if ln.startswith("run first: ") else ln for ln in lines]
    return " && ".join(" ".join(ln.split()) for ln in lines) if len(lines) > 1 else " ".join(" ".join(lines).split())


_NOTE = compile_later(r" {2,}\(.*\)$")  # a fix's note after its command (`   (requirements.txt:2 names it)`)
_BELOW = compile_later(r"(; \d+ more problem\(s\)) below\)")


# `... pip install a b==1   (a note)`: the command, and the note after it
_PIP = compile_later(r"^(?P<pre>.*?\bpip3? install)(?P<pkgs>(?: +[^\s-][^\s]*)+?)(?P<note> {2,}\(.*\))?\s*$")
_PROJECT = compile_later(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
_PIP_R = compile_later(r"^(?P<pre>.*?\bpip3? install) -r (?P<file>\S+)")  # a requirements file's own install line
_NAMED_BY = compile_later(r"\((?P<file>\S+):\d+ names it\)")  # the note of a name taken from a requirements line


def combined_fixes(fixes: list[str]) -> list[str]:
    """Each fix once, in the order first given; `pip install` lines into the same interpreter become one line
    (`pip install wandb transformers==4.44.0`), a pinned requirement winning over the bare name of a project."""
    out: list[Any] = []
    pips: dict[str, dict[str, Any]] = {}
    whole = {(m["pre"], m["file"]) for m in (_PIP_R.match((f or "").strip()) for f in fixes) if m}  # `pip install -r FILE` lines
    for fix in fixes:
        fix = (fix or "").strip()
        m = _PIP.match(fix) if "\n" not in fix else None
        named = _NAMED_BY.search(m["note"] or "") if m else None
        if named and (m["pre"], named["file"]) in whole:  # the whole file's line installs it already
            continue
        if m is None:
            # one command said by two findings with different notes (deps.requirements' and imports.smoke's
            # torch-paired install line) is one fix: the first said stays
            if fix and _NOTE.sub("", fix) not in {_NOTE.sub("", f) for f in out if isinstance(f, str)}:
                out.append(fix)
            continue
        group = pips.get(m["pre"])
        if group is None:
            group = pips[m["pre"]] = {"pkgs": {}, "note": m["note"] or ""}
            out.append(group)
        elif group["note"] != (m["note"] or ""):
            group["note"] = ""  # merged from lines that said different things: a note of one would mislead
        for spec in m["pkgs"].split():
            key = _PROJECT.match(spec)
            name = key.group().lower().replace("_", "-") if key else spec
            if name not in group["pkgs"] or group["pkgs"][name] == name and spec != name:
                group["pkgs"][name] = spec
    return [f if isinstance(f, str) else
            next(pre for pre, g in pips.items() if g is f) + " " + " ".join(f["pkgs"].values()) + f["note"]
            for f in out]


def _problems(rec: CheckRecord) -> list[Any]:
    """The findings of a record worth a line each: its findings at warn or worse, else the record itself."""
    found = [f for f in rec.findings if f.status.rank >= Status.WARN.rank]
    return found if found and rec.status.rank >= Status.WARN.rank else [rec]


def _fixes(rec: CheckRecord, reached_only: bool = False) -> list[str]:
    """A record's fixes at warn or worse; `reached_only`: without those of findings this launch never gets to
    (`data.not_reached`: an import under an option it does not give)."""
    if rec.status.rank < Status.WARN.rank:
        return []
    problems = [f for f in _problems(rec) if not (reached_only and (f.data or {}).get("not_reached"))]
    if not problems:
        return []
    return [f.fix for f in problems if f.fix] or ([rec.fix] if rec.fix else [])


def _failure_fixes(rec: CheckRecord) -> list[str]:
    """The fixes of a record's failures and errors (its warnings' advice stays under their rows)."""
    found = [f.fix for f in rec.findings if f.status.rank > Status.WARN.rank and f.fix]
    return found or ([rec.fix] if rec.fix and not rec.findings else [])


def _rows(report: Report, width: int, verbose: bool, color: bool) -> list[str]:
    """A report over many targets: one line per target, what differs between them, then each target's checks
    (only the targets with a problem, unless verbose)."""
    out = ["", "targets:"]
    tw = max(len(r.target) for r in report.targets)
    for row in report.targets:
        v = row.verdict
        word = {"ok": "ok", "failed": "FAILED"}.get(v.state, v.state.upper())
        cause = f" [{v.cause}]" if v.cause else ""
        counts = ", ".join(f"{n} {s}" for s, n in sorted(row_counts(report, row).items(),
                                                          key=lambda kv: -Status(kv[0]).rank))
        out.append(f"  {_paint(f'{word:<7}', v.state, color)} {row.target:<{tw}}  {counts} ({row.duration_s:.1f} s)"
                   f"{cause}")
    diffs = differences(report)
    if diffs:
        out += ["", "what differs:"]
        for d in diffs:
            out.extend(textwrap.wrap(d.sentence(), width, initial_indent="  ", subsequent_indent="      "))
    for row in report.targets:
        records = report.checks_of(row.target)
        if not records or (row.verdict.state == "ok" and not verbose and not any(
                r.status == Status.WARN for r in records)):
            continue
        out += ["", _paint(f"== {row.target}", row.verdict.state, color, bold=True)]
        idw = max(len(c.id) for c in records)
        for rec in records:
            if verbose or rec.status.rank > Status.SKIP.rank:
                out.extend(_check_lines(rec, idw, width, verbose, color))
        skipped = sum(1 for r in records if r.status == Status.SKIP)
        if skipped and not verbose:
            out.append(_paint(f"{skipped} skipped: -v says why", "skip", color))
    return out


def _check_lines(rec: CheckRecord, idw: int, width: int, verbose: bool, color: bool,
                 said: Optional[set[str]] = None, above: str = "") -> list[str]:
    """One line per finding of the check (its fix under it unless `said` already holds that fix; its summary
    replaced by "said above" where the text `above` the table quotes it); with `verbose`, its details, evidence
    and duration."""
    said = set() if said is None else said
    phase = f"{rec.phase:<4}"
    dur = f" ({rec.duration_s:.2f} s)" if verbose else ""
    silenced = f" (silenced: {rec.silenced})" if rec.silenced else ""
    pad = " " * (13 + idw + 2)
    lines = []
    for i, f in enumerate(_problems(rec)):
        status = _paint(f"{_MARKS[f.status.value]:<7}", f.status.value, color)
        cause = f" [{f.cause}]" if f.cause and f.status != Status.OK else ""
        # a finding read from code or a script, not observed: it warns at most (docs/checks.md)
        static = " (static reading)" if f.basis != OBSERVED and f.status != Status.OK else ""
        quoted = f.status.rank >= Status.WARN.rank and f.summary and " ".join(f.summary.split()) in above
        lines.append(f"{status} {phase} {rec.id:<{idw}}  {'(said above)' if quoted else f.summary}"
                     f"{cause}{static}{silenced}"
                     f"{dur if i == 0 else ''}")
        # said: the same command said with another note (`(paired with the installed torch)`) is said too
        if f.fix and f.status.rank >= Status.WARN.rank and (verbose or _NOTE.sub("", f.fix) not in
                                                            {_NOTE.sub("", x) for x in said}):
            lines.append(f"{pad}fix: {f.fix}")
            said.add(f.fix)
    if verbose:
        for block in (rec.details, "\n".join(rec.evidence)):
            for line in (block or "").splitlines()[:40]:
                lines.append(f"{pad}{line}")
    return lines
