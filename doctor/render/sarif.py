"""SARIF 2.1.0 for code-scanning views: one run, a rule per check (its title and help), a result per finding
with its cause id, level, message and location.

Validated in the tests against the official SARIF 2.1.0 JSON schema and read back by a SARIF library.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Optional
from urllib.parse import quote

from dfdoctor import __version__
from dfdoctor.model import Report
from dfdoctor.registry import discover
from dfdoctor.render.findings import NO_FILE, Finding, findings, level

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/dfdoctor/dfdoctor"  # where the project's docs live (README, docs/)


def _check_docs() -> dict[str, tuple[str, str, str]]:
    """(title, the check function's docstring, its module's docstring) of every registered check, for the
    rules' descriptions and help; empty when the registry cannot load."""
    try:
        return {c.id: (c.title, inspect.getdoc(c.func) or "", inspect.getdoc(inspect.getmodule(c.func)) or "")
                for c in discover()[0]}
    except Exception:
        return {}


def _rule(check_id: str, title: str, doc: str, module_doc: str) -> dict[str, Any]:
    help_text = module_doc or doc or title or check_id
    return {"id": check_id, "name": "".join(w.capitalize() for w in check_id.replace("-", ".").split(".")),
            "shortDescription": {"text": title or check_id}, "fullDescription": {"text": doc or title or check_id},
            "help": {"text": help_text, "markdown": help_text},
            "helpUri": f"{INFO_URI}#the-checks",
            "properties": {"tags": ["dfdoctor", check_id.split(".")[0]]}}


def _location(f: Finding) -> Optional[dict[str, Any]]:
    if f.path == NO_FILE:
        return None
    absolute = f.path.startswith("/")
    # A URI, not a path: `tr#ain.py` or `a b.py` percent-encoded, or a viewer reads `#ain.py` as a fragment
    uri = quote(f.path, safe="/")
    artifact = {"uri": ("file://" + uri) if absolute else uri}
    if not absolute:
        artifact["uriBaseId"] = "%SRCROOT%"
    return {"physicalLocation": {"artifactLocation": artifact, "region": {"startLine": max(1, f.line)}}}


def _result(f: Finding, index: int) -> dict[str, Any]:
    where = f" on {f.target}" if f.target else ""
    text = f"{f.summary}{where}" + (f" [{f.cause}]" if f.cause else "") + (f" Fix: {f.fix}" if f.fix else "")
    r: dict[str, Any] = {"ruleId": f.check_id, "ruleIndex": index, "level": level(f), "message": {"text": text},
                         "partialFingerprints": {"dfdoctorFinding/v1": f.fingerprint},
                         "properties": {"cause": f.cause, "status": f.status.value, "fix": f.fix,
                                        "located": f.located, **({"target": f.target} if f.target else {})}}
    loc = _location(f)
    if loc:
        r["locations"] = [loc]
    if f.silenced:
        r["suppressions"] = [{"kind": "external", "justification": f.silenced}]
    return r


def render(report: Report) -> str:
    """The SARIF log as indented JSON."""
    found = findings(report)
    docs = _check_docs()
    ids: list[str] = []
    for c in report.checks:
        if c.id not in ids:
            ids.append(c.id)
    ids += [f.check_id for f in found if f.check_id not in ids]
    titles = {c.id: c.title for c in report.checks}
    rules = [_rule(i, titles.get(i) or docs.get(i, ("", "", ""))[0] or i, *docs.get(i, ("", "", ""))[1:])
             for i in ids]
    index = {i: n for n, i in enumerate(ids)}
    v = report.verdict
    run = {
        "tool": {"driver": {"name": "dfdoctor", "version": report.tool_version or __version__,
                            "semanticVersion": report.tool_version or __version__,
                            "informationUri": INFO_URI, "rules": rules}},
        "automationDetails": {"id": f"dfdoctor/{report.mode}/"},
        "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The checkout the paths are relative to"}}},
        "invocations": [{"executionSuccessful": True,
                         **({"startTimeUtc": report.started_at} if _utc(report.started_at) else {}),
                         **({"endTimeUtc": report.finished_at} if _utc(report.finished_at) else {}),
                         "properties": {"command": list(report.command), "target": report.target}}],
        "results": [_result(f, index[f.check_id]) for f in found],
        "properties": {"verdict": v.to_dict(), "mode": report.mode,
                       **({"targets": [t.to_dict() for t in report.targets]} if report.targets else {})},
    }
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2,
                      ensure_ascii=False) + "\n"


def _utc(stamp: str) -> bool:
    """Whether a time is one SARIF's date-time format takes (ISO-8601 with a zone)."""
    return bool(stamp) and ("+" in stamp[10:] or stamp.endswith("Z") or "-" in stamp[19:])
