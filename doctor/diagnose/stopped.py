"""`dfdoctor stop` as verdicts say it: the job the user ended with it, and how to end a job that still runs.

The user ended the job with `dfdoctor stop`: say so, before any rule reads the SIGTERM it died of as a failure.
The stop is dfdoctor's own note in the run folder (launcher.jsonl, "stopped", written by `dfdoctor.stop`), kept
only when the job was running when it was stopped: a stop of what a finished job left behind changes nothing of
how the job itself ended.

A job still running or queued (`running`, `pending`) gets `dfdoctor stop RUN` at the end of its fix (`offer_stop`):
"kill PID" would end one process and leave torchrun's ranks and what a launcher backgrounded running.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord


def stop_note(launcher: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The last `dfdoctor stop` that ended a running job, from a run folder's notes."""
    return next((e for e in reversed(launcher) if e.get("event") == "stopped" and e.get("was_running")), None)


def stopped_verdict(note: dict[str, Any], run_id: str, evidence: list[str]) -> Verdict:
    """The verdict of a job the user stopped (a run here, on a target, or in Slurm)."""
    at = time.strftime("%H:%M", time.localtime(note["t"]))
    procs = note.get("stopped") or []
    killed = [p for p in procs if p.get("signal") == "SIGKILL"]
    how = (f"{len(procs)} process(es) ended, {len(killed)} of them with SIGKILL after {note.get('grace_s', 0):g} s"
           if procs else "")
    slurm = note.get("slurm") or {}
    if slurm:
        how = f"scancel of Slurm job {slurm.get('job_id')} (it was {slurm.get('before')})"
    words = note.get("words") or {}  # a placement's own terms for its stop (Ray's: its stop endpoint)
    how = words.get("how") or how
    left = note.get("survived") or []
    lines = [f"stopped at {time.strftime('%H:%M:%S', time.localtime(note['t']))} by `dfdoctor stop`"
             + (f": {how}" if how else "")]
    lines += [f"pid {p.get('pid')} ({p.get('signal') or 'ended with the job'}): {p.get('cmdline') or '?'}"
              for p in procs[:16]]
    lines += [f"STILL RUNNING after the stop: pid {p.get('pid')}: {p.get('cmdline') or '?'}" for p in left]
    lines += words.get("left") or []
    again = words.get("again") or "Launch it again when you want it to run."
    fix = (f"Nothing to fix: you stopped it. `dfdoctor stop {run_id}` again ends what survived."
           if left else f"Nothing to fix: you stopped it. {again}")
    return Verdict("ok", causes.STOPPED_BY_USER, f"{words.get('what') or 'The job'} was stopped by you at {at} "
                   "(`dfdoctor stop`).", fix, lines + evidence)


# the states of a job that still runs or waits to run: the ones a user may want to end
LIVE_STATES = ("running", "pending")


def offer_stop(verdict: Verdict, ref: str) -> Verdict:
    """`verdict` with `dfdoctor stop REF` ending its fix when its job still runs or waits (REF: the run's id, or
    slurm:JOBID for a Slurm job no run folder holds); a fix that already names `dfdoctor stop` is left as it is."""
    if str(verdict.state) not in LIVE_STATES or "dfdoctor stop" in verdict.fix:
        return verdict
    fix = verdict.fix.rstrip()
    verdict.fix = (f"{fix} " if fix else "") + f"To end the whole job: `dfdoctor stop {ref}`."
    return verdict


def stopped_by_user(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A job `dfdoctor stop` ended: the stop, not the signal it died of, is the verdict."""
    note = stop_note(run.launcher)
    if note is None:
        return None
    ex = run.exit or {}
    end = [f"exit: signal {ex['signal']}" if ex.get("signal") else f"exit: status {ex.get('exit_code')}"] if ex else []
    return stopped_verdict(note, run.id, end)
