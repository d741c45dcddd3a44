"""JUnit XML: one testcase per check, so any CI system can gate on dfdoctor."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dfdoctor.model import Report, Status
from dfdoctor.render.findings import fix_word
from dfdoctor.lazy_re import compile_later

# XML 1.0 carries only its Char production (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
# [#x10000-#x10FFFF]): captured output has control characters (ANSI colours, \x00), a path may hold U+FFFE or a
# lone surrogate (a byte that was not UTF-8). Anything else would make the report unparseable (Jenkins fails it,
# GitLab drops it), so it becomes U+FFFD.
_NOT_XML_CHAR = compile_later("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(s: str) -> str:
    return _NOT_XML_CHAR.sub("\ufffd", s or "")


def _verdict_suite(root: ET.Element, report: Report, totals: dict[str, int]) -> None:
    """A launch is judged by what happened to the job: its verdict is a testcase of its own, so a job that
    died fails the CI gate even when every check passed."""
    v = report.verdict
    suite = ET.SubElement(root, "testsuite", name=f"dfdoctor.{report.mode}", tests="1", timestamp=report.started_at,
                          failures="1" if v.state in ("failed", "unknown") else "0", errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname=f"dfdoctor.{report.mode}", name=f"{report.mode}.verdict")
    totals["tests"] += 1
    body = "\n".join([v.summary, *v.evidence, f"{fix_word(v.state).capitalize()}: {v.fix}" if v.fix else ""]).strip()
    if v.state in ("failed", "unknown"):
        el = ET.SubElement(case, "failure", message=_clean(f"[{v.cause}] {v.summary}" if v.cause else v.summary),
                           type=v.cause or v.state)
        el.text = _clean(body)
        totals["failures"] += 1
    else:
        ET.SubElement(case, "system-out").text = _clean(f"{v.state.upper()} {body}")


def render(report: Report, verbose: bool = False, fail_on: str = "error") -> str:
    """A `<testsuites>` with one `<testsuite>` per phase; warn is a failure only under `--fail-on warn`."""
    root = ET.Element("testsuites", name="dfdoctor")
    phases = sorted({c.phase for c in report.checks}, key=lambda p: (p != "pre", p)) or ["pre"]
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    # Over many targets, one suite per target and phase: a CI page then names the target that failed.
    groups = [(t.target, p) for t in report.targets for p in phases] if report.targets else [(None, p) for p in phases]
    for target, phase in groups:
        records = [c for c in report.checks if c.phase == phase and (target is None or c.target == target)]
        if target is not None and not records:
            continue
        where = f"@{target}" if target else ""
        suite = ET.SubElement(root, "testsuite", name=f"dfdoctor.{phase}{where}", timestamp=report.started_at,
                              hostname=str(target or report.environment.get("host", "")))
        counts = {"tests": len(records), "failures": 0, "errors": 0, "skipped": 0}
        time_total = 0.0
        for rec in records:
            time_total += rec.duration_s
            case = ET.SubElement(suite, "testcase", classname=f"dfdoctor.{phase}{where}", name=rec.id,
                                 time=f"{rec.duration_s:.3f}")
            body = "\n".join(x for x in (rec.summary, rec.details, "Evidence:\n" + "\n".join(rec.evidence)
                                         if rec.evidence else "", "Fix: " + rec.fix if rec.fix else "") if x)
            message = _clean(f"[{rec.cause}] {rec.summary}" if rec.cause else rec.summary)
            if rec.silenced:
                ET.SubElement(case, "skipped", message=_clean(f"silenced ({rec.status.value}): {rec.silenced}"))
                counts["skipped"] += 1
            elif rec.status == Status.FAIL or (rec.status == Status.WARN and fail_on == "warn"):
                el = ET.SubElement(case, "failure", message=message, type=rec.cause or rec.status.value)
                el.text = _clean(body)
                counts["failures"] += 1
            elif rec.status in (Status.ERROR, Status.TIMEOUT):
                el = ET.SubElement(case, "error", message=message, type=rec.status.value)
                el.text = _clean(body)
                counts["errors"] += 1
            elif rec.status == Status.SKIP:
                ET.SubElement(case, "skipped", message=message)
                counts["skipped"] += 1
            elif rec.status == Status.WARN:
                ET.SubElement(case, "system-out").text = _clean("WARN " + body)
            if rec.output:
                ET.SubElement(case, "system-err").text = _clean(rec.output)
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
        suite.set("time", f"{time_total:.3f}")
    if report.mode in ("launch", "status"):
        _verdict_suite(root, report, totals)
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    # cleaned once more whole: a target's name, a plugin's check id or a cause reach attributes too
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + _clean(ET.tostring(root, encoding="unicode")) + "\n"
