"""One finding per cause: a root cause that leaves other checks unable to look (no interpreter at the hop) is
said once, by the check that saw it; the checks it stopped say "not examined: <that cause>" as a skip, never a
FAIL or ERROR of their own (issue 39: one missing `python` was four failures)."""

from __future__ import annotations

import re
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import CheckRecord, Status

# how probe.py says that the interpreter a probe needs could not be started at the target
_NO_INTERPRETER = re.compile(r"no interpreter '([^']+)' on ")
_STOPPED = (Status.FAIL, Status.ERROR, Status.WARN)


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
