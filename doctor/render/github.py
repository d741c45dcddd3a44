"""GitHub Actions: workflow commands (`::error file=F,line=L,title=T::message`) that annotate the file and line,
and a Markdown summary for the run page.

GitHub shows only about ten annotations of a step, so the most important come first and, when there are more,
the tenth says how many were left out and where to read them. The summary (verdict first, a table of checks,
the fix) is what `dfdoctor.engine` appends to `$GITHUB_STEP_SUMMARY`, kept under GitHub's 1 MiB.
"""

from __future__ import annotations


from dfdoctor.model import Report, Status
from dfdoctor.render.findings import NO_FILE, Finding, findings, fix_word, level
from dfdoctor.render.text import verdict_line, visible
from dfdoctor.lazy_re import compile_later

ANNOTATIONS_SHOWN = 10
SUMMARY_LIMIT = 1024 * 1024  # GitHub refuses a step summary over 1 MiB
_MARKS = {"ok": "✅ ok", "skip": "⏭️ skip", "warn": "⚠️ warn", "fail": "❌ fail", "timeout": "⏱️ timeout",
          "error": "💥 error"}
_STATES = {"ok": "✅ OK", "running": "✅ RUNNING", "failed": "❌ FAILED", "unknown": "⚠️ UNKNOWN"}


def escape_data(s: str) -> str:
    """A workflow command's message, as GitHub's toolkit escapes it, and every other control character (a path's
    raw ESC would repaint the log page's terminal view) written out as `\\xNN`."""
    return visible((s or "").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(s: str) -> str:
    """A workflow command's property value (file, title): also ':' and ','."""
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


# GitHub's runner splits a step's output at \r and \n, and reads a line as a command when, its leading whitespace
# (.NET's: any Unicode space) stripped, it starts with `::`; its older syntax takes `##[` anywhere in a line. A
# zero-width space is no whitespace to .NET, and invisible to a reader.
_COMMAND_LINE = compile_later(r"(^|[\r\n])([^\S\r\n]*)::")
_LEGACY = "##["
_BREAK = "\u200b"


def inert(text: str) -> str:
    """`text` with no line GitHub's runner would take as a workflow command (for text that is not ours)."""
    text = _COMMAND_LINE.sub(lambda m: m.group(1) + m.group(2) + _BREAK + "::", text)
    return text.replace(_LEGACY, "##" + _BREAK + "[")


def annotation(f: Finding) -> str:
    """One `::error|warning|notice` line for a finding."""
    kind = {"error": "error", "warning": "warning", "note": "notice"}[level(f)]
    where = f" on {f.target}" if f.target else ""
    props = []
    if f.path != NO_FILE:
        props += [f"file={escape_property(f.path)}", f"line={f.line}"]
    props.append(f"title={escape_property(f'dfdoctor {f.check_id}' + (f' [{f.cause}]' if f.cause else '') + where)}")
    text = f.summary + (f"\nFix: {f.fix}" if f.fix else "") + (f"\nSilenced: {f.silenced}" if f.silenced else "")
    return f"::{kind} {','.join(props)}::{escape_data(text)}"


def render(report: Report) -> str:
    """The annotations, most important first, at most ten (the tenth saying how many more), then one line."""
    found = findings(report)
    lines = [annotation(f) for f in found[:ANNOTATIONS_SHOWN]]
    if len(found) > ANNOTATIONS_SHOWN:
        more = len(found) - (ANNOTATIONS_SHOWN - 1)
        lines[-1] = (f"::notice title={escape_property(f'dfdoctor: {more} more finding(s)')}::"
                     + escape_data(f"GitHub shows {ANNOTATIONS_SHOWN} annotations of a step: {more} more "
                                   "finding(s) are in the step summary and the full report (--format json or html)."))
    v = report.verdict
    lines.append(inert(escape_data(verdict_line(report))))  # the last line: no "more problem(s) below" above nothing
    return "\n".join(lines) + "\n"


def _cell(s: str, limit: int = 300) -> str:
    s = " ".join((s or "").split())
    s = s if len(s) <= limit else s[:limit - 1] + "…"
    # prose is escaped for Markdown and HTML; a `code span` in it shows its text as is (`> LOG`, never
    # `&gt; LOG`): only the table's `|` is escaped there. After an unclosed backtick the rest is prose.
    parts = s.split("`")
    spans = [part.replace("|", "\\|") if i % 2 and i < len(parts) - 1 else
             part.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
             for i, part in enumerate(parts)]
    return "`".join(spans) or " "


def _code(s: str, limit: int = 300) -> str:
    """A code span in a table cell: raw text (Markdown shows a code span as written, so `>` stays `>`, never
    `&gt;`); only the table's `|` is escaped, and a backtick, which would end the span, becomes `'`."""
    s = " ".join((s or "").split()).replace("`", "'")
    s = s if len(s) <= limit else s[:limit - 1] + "…"
    return f"`{s.replace('|', chr(92) + '|')}`" if s else ""


def summary(report: Report, limit: int = SUMMARY_LIMIT) -> str:
    """The Markdown summary: verdict, fix, a table of checks (problems first), within `limit` bytes."""
    v = report.verdict
    head = [f"## dfdoctor {report.mode}: {_STATES.get(v.state, v.state.upper())}"
            + (f" `{v.cause}`" if v.cause else ""), "", _cell(v.summary, 2000), ""]
    if v.fix:
        head += [f"**{fix_word(v.state).capitalize()}:** {_cell(v.fix, 2000)}", ""]
    if report.command:
        head += [f"Command: {_code(' '.join(map(str, report.command)))}", ""]
    many = bool(report.targets)
    if many:
        head += ["| target | verdict | cause |", "| --- | --- | --- |"]
        head += [f"| {_code(r.target)} | {_STATES.get(r.verdict.state, r.verdict.state)} | "
                 f"{_code(r.verdict.cause or '')} |" for r in report.targets]
        head.append("")
    order = sorted(report.checks, key=lambda c: (c.silenced is None, c.status.rank), reverse=True)
    table = [("| status | check | target | summary | cause | fix |" if many else
              "| status | check | summary | cause | fix |"),
             "| --- | --- | --- | --- | --- | --- |" if many else "| --- | --- | --- | --- | --- |"]
    for c in order:
        mark = _MARKS[c.status.value] + (" (silenced)" if c.silenced else "")
        fix = _cell(c.fix) if c.fix and c.status.rank >= Status.WARN.rank else ""
        cells = [mark, _code(c.id), *([_code(c.target or "")] if many else []), _cell(c.summary),
                 _code(c.cause or "") if c.status.rank >= Status.WARN.rank else "", fix]
        table.append("| " + " | ".join(cells) + " |")
    foot = ["", f"<sub>dfdoctor {report.tool_version} · secrets masked as `***`</sub>", ""]
    out = "\n".join(head + table + foot)
    if len(out.encode()) <= limit:
        return out
    # Too big: keep the verdict and as many rows as fit (problems first), and say how many were left out.
    kept = list(table[:2])
    size = len("\n".join(head + foot).encode()) + 200
    for row in table[2:]:
        if size + len(row.encode()) + 1 > limit:
            break
        kept.append(row)
        size += len(row.encode()) + 1
    dropped = len(table) - len(kept)
    return "\n".join(head + kept + ["", f"*… {dropped} more check(s) left out to stay under GitHub's 1 MiB "
                                        "summary limit: see the full report.*"] + foot)
