"""A virtual environment's python as a candidate of the fix search (issue 39): `python train.py` where the system
python lacks a module the script imports and the project's venv (`.venv`, `venv`, `env` beside the script or one
folder up, or the one its README activates) has it. What the sentinel saw at the script's place says both (its
start.json: `modules_missing`, `venvs`, read in the rehearsal's own round trip), and the venv's line wins only when
its own rehearsal passed and its python finds those modules."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from dfdoctor.rehearse import changes
from dfdoctor.rehearse.runner import Rehearsal


def instead(r: Rehearsal, fx, attempt: Callable[..., object]):
    """The fix with the venv's python in place of the system's, or None (then `fx` stands). `fx`: a fix seen to
    work with the system's python; `attempt(python=...)`: the same candidate composed with `python` and rehearsed (one
    rehearsal, counted by the search)."""
    job = r.plan.job
    if job.launcher is not None or job.runner != "python" or fx.rehearsal is None or fx.rehearsal.job_place is None:
        return None
    seen = fx.rehearsal.job_place.start or {}
    missing = list(seen.get("modules_missing") or [])
    pythons = [p for p in seen.get("venvs") or [] if p != job.interpreter]
    if not missing or not pythons:
        return None
    python = pythons[0]  # the script's own folder's first, then the folder above it (the sentinel's order)
    tried = attempt(python=python)
    got = (tried.rehearsal.job_place.start or {}) if tried.rehearsal and tried.rehearsal.job_place else {}
    if not tried.works or set(missing) & set(got.get("modules_missing", missing)):
        return None  # not seen to work, or its python lacks them too: the system's line stands
    system = (fx.interpreter or {}).get("to") or job.interpreter
    said = [c for c in tried.changes if not c.startswith(f"`{job.interpreter}` → ")]
    clause = changes.venv(job.interpreter, python, system, missing)
    return dataclasses.replace(tried, changes=[clause, *said])
