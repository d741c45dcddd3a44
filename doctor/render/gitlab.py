"""GitLab code quality (the `codequality` report of a job): a JSON array, one issue per finding, with the fields
GitLab requires (description, check_name, fingerprint, severity, location.path, location.lines.begin).

The fingerprint stays the same from one run to the next for the same problem, so GitLab can tell a merge
request's new findings from the ones its target branch already had.
"""

from __future__ import annotations

import json

from dfdoctor import causes
from dfdoctor.model import Report, Status
from dfdoctor.render.findings import Finding, findings


def severity(f: Finding) -> str:
    """info, minor, major, critical or blocker."""
    if f.silenced:
        return "info"
    if f.status == Status.WARN:
        return "minor"
    if f.status in (Status.ERROR, Status.TIMEOUT):
        return "major"  # dfdoctor could not decide: serious, but not proven to break the launch
    return "blocker" if f.cause in causes.LAUNCH_BLOCKERS else "critical"


def issue(f: Finding) -> dict:
    where = f" on {f.target}" if f.target else ""
    text = f"{f.summary}{where}" + (f" [{f.cause}]" if f.cause else "")
    return {"type": "issue", "description": text, "check_name": f.check_id,
            "fingerprint": f.fingerprint[:32], "severity": severity(f),
            "categories": ["Bug Risk"],
            "location": {"path": f.path, "lines": {"begin": max(1, f.line)}},
            "content": {"body": (f"Fix: {f.fix}" if f.fix else "")
                        + (f"\n\nSilenced: {f.silenced}" if f.silenced else "")}}


def render(report: Report) -> str:
    """The code-quality report as a JSON array."""
    return json.dumps([issue(f) for f in findings(report)], indent=2, ensure_ascii=False) + "\n"
