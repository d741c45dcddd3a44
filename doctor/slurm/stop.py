"""`dfdoctor stop` for a Slurm job: `scancel`, then Slurm's own word (squeue, scontrol/sacct) that it ended.

Slurm ends every process of the job on every node itself: it sends SIGTERM to the batch script and each step,
then SIGKILL once its KillWait has passed (`scontrol show config`). dfdoctor only asks, and then waits until the
job has left squeue (no longer COMPLETING, so nothing of it runs on a node) and its state is a final one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dfdoctor.placing_answers import Ended
from dfdoctor.slurm import commands
from dfdoctor.slurm.job import facts

POLL_S = 0.5
KILL_WAIT_S = 30.0  # Slurm's default KillWait: between its SIGTERM and its SIGKILL


@dataclass
class Cancelled(Ended):
    """What `scancel` did to one job, and what Slurm said of it afterwards (`left`: what squeue still shows of
    the job, STATE on NODES; `said`: scancel's own words when it refused). Done: it left squeue and its state is
    final."""

    @property
    def was_running(self) -> bool:
        return self.state_before in ("RUNNING", "PENDING", "SUSPENDED", "CONFIGURING", "REQUEUED")

    def lines(self) -> list[str]:
        if self.said:
            return [f"scancel {self.job_id} refused: {self.said}"]
        if not self.was_running:
            return [f"Slurm job {self.job_id} was already {self.state_before.lower()}: nothing to cancel"]
        return [f"cancelled Slurm job {self.job_id} (it was {self.state_before}); Slurm now says "
                f"{self.state_after or 'nothing'}" + (f"; still in its queue: {', '.join(self.left)}"
                                                      if self.left else "")]

    def left_words(self) -> str:
        return f"Slurm job {self.job_id} ({', '.join(self.left)})"

    def note(self) -> dict[str, Any]:
        return {"slurm": {"job_id": self.job_id, "before": self.state_before, "after": self.state_after,
                          "left": self.left}}


def queued(job_id: str) -> list[str]:
    """What squeue still shows of the job: one 'STATE on NODES' per line (empty once Slurm let it go)."""
    a = commands.run(["squeue", "-h", "-j", job_id, "-o", "%T %N"])
    return [" on ".join(line.split(None, 1)) for line in a.out.splitlines() if line.strip()] if a.ok else []


def scancel(job_id: str, grace_s: float) -> Cancelled:
    """Cancel the job and wait (at most its grace plus Slurm's KillWait) until Slurm says it is gone."""
    before = facts(job_id, with_sacct=True)
    out = Cancelled(job_id, before.state or "unknown to Slurm")
    if before.ended or not before.known:
        out.state_after = before.state
        return out
    a = commands.run(["scancel", job_id])
    if not a.ok:
        out.said = a.said or f"scancel exited {a.rc}"
        return out
    deadline = time.monotonic() + grace_s + KILL_WAIT_S
    while True:
        out.left = queued(job_id)
        if not out.left or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    out.state_after = facts(job_id, with_sacct=True).state
    return out
