"""A RUNNING Slurm job's processes, looked at on its node: the same stacks and kernel waits as a local job's,
judged by the same rules (`diagnose.stuck`).

`srun --overlap --jobid ID -w NODE` starts one more step of the job there (it shares the job's CPUs, so it
never waits for resources) running the agent's part `slurm-job` (agent/slurm_job.py) in the node's python3; its answer becomes the
ProcessSamples a --target's look gives. Only the batch host is looked at: the batch script and the processes
it started live there; the other nodes of a multi-node job are not sampled.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from dfdoctor.agent import ship
from dfdoctor.diagnose import stacks, stuck
from dfdoctor.diagnose.jobstacks import ProcessSample
from dfdoctor.diagnose.look import named_wait, samples_of
from dfdoctor.agent.target_agent import MARK
from dfdoctor.slurm import commands
from dfdoctor.slurm.job import OWN_STEP

TIMEOUT_S = 40.0  # srun's start (~0.5 s), two looks a second apart, py-spy up to 5 s a process


@dataclass
class NodeLook:
    """What one look at the job's node gave: its processes sampled, the finding they prove, or why none."""

    node: str
    samples: list[ProcessSample] = field(default_factory=list)
    finding: Optional[stuck.Finding] = None
    error: Optional[str] = None
    took_s: float = 0.0
    leaning: Optional[str] = None  # what the looks lean towards without proving it (their moves are no progress)

    def lines(self) -> list[str]:
        """Every process's summary and stack excerpt, for a verdict without a finding."""
        return [line for s in stuck.seen(self.samples) for line in stuck.excerpt(s, 3)]


def srun_argv(job_id: str, node: str) -> list[str]:
    """The step that runs the job agent on the node: overlapping the job's own steps, one task, quiet, named
    so that its accounting row is known as dfdoctor's (job.OWN_STEP), never read as the user's step."""
    return ["srun", "--overlap", "--jobid", job_id, "-w", node, "-N1", "-n1", "--quiet", "-J", OWN_STEP,
            *ship.stdin_argv("python3", "slurm-job", job_id, stacks.py_spy() or "")]


def sample(job_id: str, node: str, timeout: float = TIMEOUT_S) -> tuple[list[ProcessSample], Optional[str]]:
    """(the job's processes on `node`, each looked at twice), or ([], why not)."""
    answer = commands.run(srun_argv(job_id, node), timeout=timeout, stdin=ship.stdin_line("slurm-job").decode())
    _, mark, text = answer.out.rpartition(MARK)
    if not mark:
        return [], f"srun on {node}: " + (answer.said or f"no answer (status {answer.rc})")
    try:
        got: dict[str, Any] = json.loads(text)
    except ValueError:
        return [], f"srun on {node}: a malformed answer: {text[:200]}"
    samples = samples_of(got.get("samples"))
    if not samples:
        return [], f"no process of job {job_id} found on {node}"
    return samples, None


def leaning(samples: list[ProcessSample]) -> Optional[str]:
    """What looks that named no wait lean towards without proving it: a loop over an empty DataLoader, whose
    passes move the stack (stuck.judge says nothing while it is undecided; a look here takes more looks, a
    node's cannot), or a working process seen only at a `for` head (empty_loop.lean). None: they lean nowhere."""
    from dfdoctor.diagnose import empty_loop  # reads the project's source: only for a silent job's look
    return empty_loop.lean(stuck.seen(samples))


def look(job_id: str, node: str, quiet_s: float) -> NodeLook:
    """Sample the job on its node and judge the stacks as a local job's (`judged`)."""
    began = time.monotonic()
    samples, error = sample(job_id, node)
    seen = judged(node, samples, quiet_s)
    seen.error = seen.error or error
    seen.took_s = time.monotonic() - began
    return seen


def judged(node: str, samples: list[ProcessSample], quiet_s: float) -> NodeLook:
    """The samples of a node judged as a local job's: a lock cycle both looks show, else the wait they prove (the
    pids are the node's, so a lock holder is named only when it is one of the job's own processes), else what
    they lean towards without proving it (no more looks are taken there)."""
    seen = NodeLook(node, samples)
    if samples:
        seen.finding, seen.error = named_wait(samples, quiet_s, local=False)
        if seen.finding is None and seen.error is None:
            seen.leaning = leaning(samples)
    return seen
