"""One finding per cause: a root cause that leaves other checks unable to look (no interpreter at the hop) is
said once, by the check that saw it; the checks it stopped say "not examined: <that cause>" as a skip, never a
FAIL or ERROR of their own (issue 39: one missing `python` was four failures). Likewise one missing package that
two checks saw (the job's import of it failed, and the requirement that names it is not installed) is one failing
row, the import's; the requirement's row points at it (pytorch/examples mnist without torchvision: two FAILs)."""

from __future__ import annotations

import os
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import CheckRecord, Result, Status
from dfdoctor.lazy_re import compile_later

# how probe.py says that the interpreter a probe needs could not be started at the target
_NO_INTERPRETER = compile_later(r"no interpreter '([^']+)' on ")
_STOPPED = (Status.FAIL, Status.ERROR, Status.WARN)
# how deps.requirements names a requirement that is not installed (checks/deps_requirements.py)
_NOT_INSTALLED = compile_later(r"^(?P<name>[A-Za-z0-9][\w.-]*) is not installed in ")


def one_missing_interpreter(records: list[CheckRecord]) -> list[CheckRecord]:
    """When imports.smoke could not start the interpreter, the checks whose probe needed it are skips pointing at
    it. When launch.path's working fix already swapped that interpreter for one that exists there, the missing one
    is a clause of that fix, and imports.smoke is a skip too (its probe examined nothing)."""
    root = next((r for r in records if r.id == "imports.smoke" and r.cause == causes.COMMAND_NOT_FOUND
                 and _NO_INTERPRETER.search(r.summary)), None)
    if root is None:
        return records
    word = _NO_INTERPRETER.search(root.summary).group(1)
    swap = _swapped_by_fix(records, word)
    cause = (f"there is no {word} at the target; launch.path's fix uses {swap} (--python {swap} examines it)"
             if swap else f"the interpreter {word} cannot be started (see imports.smoke)")
    for r in records:
        if r.id == "launch.path" or (r is root and not swap) or r.status not in _STOPPED or r.silenced:
            continue
        if r is root or _stopped_by(r, word):
            r.status, r.cause, r.fix, r.findings = Status.SKIP, None, "", []
            r.summary = f"not examined: {cause}"
    return records


def _stopped_by(r: CheckRecord, word: str) -> bool:
    """Whether this record's problem is that the interpreter `word` could not be started for its probe."""
    if f"no interpreter {word!r}" in r.summary:
        return True
    if r.id == "target.reachable" and r.summary.startswith(f"no {word} on "):
        return True
    # a probe run as `WORD -c ...` by a shell that has no WORD: the shell's 127, "command not found"
    return r.id.startswith("deps.") and "(exit status 127)" in r.summary


def _swapped_by_fix(records: list[CheckRecord], word: str) -> Optional[str]:
    """The interpreter launch.path's working fix uses in place of `word`, if it swapped it."""
    lp = next((r for r in records if r.id == "launch.path" and r.status == Status.FAIL), None)
    fix = (lp.data.get("fix") or {}) if lp else {}
    swap = fix.get("interpreter") or {}
    return swap.get("to") if fix.get("works") and swap.get("from") == word else None


def one_missing_module(records: list[CheckRecord]) -> list[CheckRecord]:
    """A requirement deps.requirements found not installed, whose module imports.smoke saw the job fail to import:
    one cause. The import's failure stays (it names the job's own line); the requirement's finding becomes a
    warning that says it is that same cause, its fix unchanged (the same line, said once above)."""
    smoke = next((r for r in records if r.id == "imports.smoke" and r.status == Status.FAIL and not r.silenced), None)
    deps = next((r for r in records if r.id == "deps.requirements" and r.status == Status.FAIL and not r.silenced),
                None)
    if smoke is None or deps is None:
        return records
    # here, not at the top: engine imports this module on `launch --no-check`'s way to its start, and the project
    # model is not needed there (tests/test_launch_startup.py)
    from dfdoctor.project.install import PIP_NAMES, canonical
    failed = {}  # the distribution each failed import comes from -> how imports.smoke said it
    for f in _findings(smoke):
        missing = (f.data or {}).get("missing") if f.status == Status.FAIL and f.cause == causes.MISSING_MODULE else None
        if missing:
            top = missing.split(".")[0]
            for name in (PIP_NAMES.get(missing), PIP_NAMES.get(top), top):
                if name:
                    failed.setdefault(canonical(name), f)
    if not failed:
        return records
    findings = [_pointer(f, failed) for f in _findings(deps)]
    if findings != _findings(deps):
        _rebuild(deps, findings)
    return records


def _findings(r: CheckRecord) -> list:
    """A record's findings: its list, or the record itself when it holds one result."""
    return list(r.findings) if r.findings else [r]


def _pointer(f, failed: dict) -> object:
    """A missing requirement whose import failed: a warning pointing at that failure; any other finding as it is."""
    from dfdoctor.project.install import canonical
    m = _NOT_INSTALLED.match(f.summary or "")
    seen = failed.get(canonical(m.group("name"))) if m and f.status == Status.FAIL else None
    if seen is None:
        return f
    at = seen.summary.split(", imported at ", 1)[1].split(" ")[0] if ", imported at " in seen.summary else ""
    at = f" at {os.path.basename(at)}" if at else ""  # the file's name: the row beside it has the whole path
    return Result(Status.WARN, f"{f.summary}: the same cause as imports.smoke's failure{at}, said there",
                  f.cause, f.details, f.fix, tuple(f.evidence), dict(f.data or {}), f.basis)


def _rebuild(r: CheckRecord, findings: list) -> None:
    """The record again from its findings, as CheckRecord.from_results makes it: the worst one leads."""
    worst = max(findings, key=lambda f: f.status.rank)
    r.status, r.summary, r.cause, r.details, r.fix = worst.status, worst.summary, worst.cause, worst.details, worst.fix
    r.evidence, r.basis = list(worst.evidence), worst.basis
    r.findings = findings if len(findings) > 1 else []
