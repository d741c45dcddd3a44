"""Before and after, connected: a pre-launch check that observed the failure the job then died of is named in
the verdict ("cuda.nccl predicted this before the launch"), and an observed failure the job will certainly meet
stops the launch before it starts (unless --force).

"Certainly" is kept narrow: the check reproduced the failure itself (cuda.nccl could not form an NCCL group here),
and the job's own words say it takes that path (its command or script names the NCCL backend, and nothing in the
command overrides it). Anything less only warns, as the check itself already does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import CheckRecord, Status, Verdict
from dfdoctor.diagnose.pg_backend import read_backend
from dfdoctor.lazy_re import compile_later

# Pre-launch checks whose finding of one cause foretells a verdict of another.
RELATED = {causes.DEPENDENCY_MISMATCH: {causes.IMPORT_ERROR, causes.DEPENDENCY_MISMATCH},
           causes.MISSING_MODULE: {causes.MISSING_MODULE, causes.DEPENDENCY_MISSING},
           causes.DISTRIBUTED_ENV_MISSING: {causes.IMPORT_ERROR}}


def link(verdict: Verdict, records: list[CheckRecord]) -> Verdict:
    """The verdict, saying which pre-launch check predicted it when one did."""
    if str(verdict.state) != "failed" or not verdict.cause:
        return verdict
    allowed = RELATED.get(verdict.cause, set()) | {verdict.cause}
    seen = [r for r in records if r.phase == "pre" and r.status in (Status.FAIL, Status.WARN) and not r.silenced
            and r.cause in allowed and _same_failure(r, verdict)]
    if not seen:
        return verdict
    first = max(seen, key=lambda r: r.status.rank)
    said = "predicted" if first.status == Status.FAIL and first.observed else "warned of"
    summary = f"{verdict.summary} {first.id} {said} this before the launch."
    evidence = [f"before the launch, {r.id} ({r.status.value}): {r.summary}" for r in seen] + list(verdict.evidence)
    return dataclasses.replace(verdict, summary=summary, evidence=evidence)


# Causes that are a fact of the machine (no GPU, no NCCL): a check that found the cause found the failure.
MACHINE_FACTS = {causes.CUDA_UNAVAILABLE, causes.CUDA_INIT_FAILED, causes.NCCL_FAILED}
_EXCEPTION = compile_later(r"\b(\w+(?:Error|Exception): \S.{3,})")  # the exception words the job died with


def _same_failure(record: CheckRecord, verdict: Verdict) -> bool:
    """Whether the check's finding is the failure the job died of, not just the same kind of cause: a machine
    fact, or the same exception words (a conditional import that warned is not the import that killed the job)."""
    if record.cause in MACHINE_FACTS and verdict.cause in MACHINE_FACTS:
        return True
    found = " ".join([record.summary, *record.evidence, record.details or ""])
    died = [m.group(1)[:80] for line in [verdict.summary, *verdict.evidence] for m in [_EXCEPTION.search(line)] if m]
    return any(d in found for d in died)


def certain(records: list[CheckRecord], command: list[str], cwd: Path) -> list[CheckRecord]:
    """The pre-launch failures the job will certainly meet, each with the reading that makes it certain."""
    out = []
    for r in records:
        if r.phase != "pre" or r.status != Status.FAIL or not r.observed or r.silenced:
            continue
        if r.id == "cuda.nccl" and r.cause == causes.NCCL_FAILED:
            why = _uses_nccl(command, cwd)
            if why:
                out.append(dataclasses.replace(r, evidence=[*r.evidence, f"the job uses NCCL: {why}"]))
    return out


def _uses_nccl(command: list[str], cwd: Path) -> Optional[str]:
    """Why the job will initialise NCCL whatever the machine, or None when that is not plain."""
    read = read_backend(command, cwd)
    return read.why if read and read.always_nccl() else None
