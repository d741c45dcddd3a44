"""The terminal view: the verdict first, then a table of checks; colour only where it helps."""

from __future__ import annotations

import dataclasses
import enum
import re
import shutil
import textwrap
from typing import Any

from dfdoctor.model import CheckRecord, Report, Status
from dfdoctor.rows import differences, row_counts

# Every C0 and C1 control but newline and tab, and DEL: what lets a job's bytes repaint a terminal, ring it,
# move the cursor back over a line (CR) or fake a verdict in colour. Shown as \xNN escapes instead.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

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


def _paint(text: str, key: str, color: bool, bold: bool = False) -> str:
    if not color:
        return text
    code = _COLOURS.get(key, "0")
    return f"\x1b[{'1;' if bold else ''}{code}m{text}\x1b[0m"


def render(report: Report, verbose: bool = False, color: bool = False) -> str:
    """Verdict, then one line per check (details and durations with `verbose`); control characters in what the
    report quotes (a job's output, a path) are shown escaped, so only our own colour codes reach the terminal."""
    report = _visible_all(report)
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))
    out: list[str] = []
    v = report.verdict
    head = {"ok": "OK", "running": "RUNNING", "failed": "FAILED", "unknown": "UNKNOWN"}.get(v.state, v.state.upper())
    cause = f" [{v.cause}]" if v.cause else ""
    out.append(_paint(f"dfdoctor {report.mode}: {head}{cause}", v.state, color, bold=True))
    if v.summary:
        out.extend(textwrap.wrap(v.summary, width, initial_indent="  ", subsequent_indent="  "))
    for line in v.evidence[:8]:
        out.append("  | " + line)
    if v.fix:
        label = "fix: " if v.state in ("failed", "unknown") else "next: "  # a running job needs no fixing
        out.append(_paint("  " + label, "warn", color) + v.fix)
    if report.run.get("dir"):
        out.append(f"  run: {report.run.get('dir')}")
    if report.targets:
        out.extend(_rows(report, width, verbose, color))
    elif report.checks:
        out.append("")
        idw = max(len(c.id) for c in report.checks)
        for rec in report.checks:
            out.extend(_check_lines(rec, idw, width, verbose, color))
    return "\n".join(out) + "\n"


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
            if verbose or rec.status != Status.OK:
                out.extend(_check_lines(rec, idw, width, verbose, color))
    return out


def _check_lines(rec: CheckRecord, idw: int, width: int, verbose: bool, color: bool) -> list[str]:
    mark = _MARKS[rec.status.value]
    status = _paint(f"{mark:<7}", rec.status.value, color)
    phase = f"{rec.phase:<4}"
    dur = f" ({rec.duration_s:.2f} s)" if verbose else ""
    cause = f" [{rec.cause}]" if rec.cause and rec.status != Status.OK else ""
    silenced = f" (silenced: {rec.silenced})" if rec.silenced else ""
    # a finding read from code or a script, not observed: it warns at most (docs/checks.md)
    static = " (static reading)" if not rec.observed and rec.status != Status.OK else ""
    lines = [f"{status} {phase} {rec.id:<{idw}}  {rec.summary}{cause}{static}{silenced}{dur}"]
    pad = " " * (13 + idw + 2)
    if rec.fix and rec.status.rank >= Status.WARN.rank:
        lines.append(f"{pad}fix: {rec.fix}")
    if verbose:
        for block in (rec.details, "\n".join(rec.evidence)):
            for line in (block or "").splitlines()[:40]:
                lines.append(f"{pad}{line}")
        for f in rec.findings:
            if f.summary != rec.summary:
                lines.append(f"{pad}- {f.status.value}: {f.summary}" + (f" [{f.cause}]" if f.cause else ""))
    return lines
