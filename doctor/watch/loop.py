"""The one watch loop, for a job on this machine, on a --target and in Slurm alike: it asks a source what it sees
now, asks the policy (policy.py) what to do, does it, and keeps the progress line.

The loop knows no kind of job. A source, handed in, is where the watch meets one: this machine's run folder and
/proc (`launch/local.py`), a target's agent answers read into a local copy of the run folder (the same source
with `launch/remote.py`'s readers), Slurm's scontrol/sacct and its node's look (`slurm/watch.py`). What only a
source can know (the job ended, it waits in Slurm's queue, its launcher handed off) it says as an `Ended` or as
words for the progress line; all else goes through the policy. What a look at the stacks means is
`diagnose/look.py`'s; the source only takes the look.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Union

from dfdoctor.progress import WatchLine, seconds
from dfdoctor.watch.policy import Decision, Observation, Policy


@dataclass
class Ended:
    """The watch is over, and this is what it saw (the source's own result: a run and its facts, a Slurm job)."""

    result: Any
    said: Optional[str] = None  # what the watch waited for until this end, for the progress line (Slurm's queue)


class Source(Protocol):
    """Where the watch meets one kind of job (see the module's docstring). `t` is the watch's clock: seconds
    since it began."""

    stacks_where: str  # where a look at the stacks is taken, for the progress line (" on node01")

    def observe(self, t: float) -> Union[Observation, Ended, str]:
        """The job now: an observation for the policy, the watch's end, or (nothing to judge yet: the job is
        starting, it waits in Slurm's queue) what the watch waits for, in words."""

    def settle(self, o: Observation, steady: bool) -> None:
        """Fill in whether every process the job should have is up (`o.unsettled`, `settle_checked`,
        `ranks_settled_s`); `steady`: the policy finds the output steady (a deeper look is worth it now)."""

    def waiting_for(self, o: Observation, steady: bool) -> str:
        """What the watch waits for now, in the words of the progress line."""

    def sample(self, o: Observation) -> Optional[Any]:
        """Look at the stacks of the silent job: the watch's result when the look proves a wait, else None."""

    def running(self, o: Observation, looping: Optional[str]) -> Any:
        """The result for a job the policy calls running (`looping`: the evidence that it is in its loop); None
        when the output stopped meanwhile (its look takes a second or more): the watch goes on."""

    def out_of_time(self, o: Observation) -> Optional[Any]:
        """The result once the watch is over (None: not yet certain, observe once more)."""


def drive(source: Source, policy: Policy, line: WatchLine, poll_s: float,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Any:
    """Watch until the source ends the watch or the policy's decision does; the source's result."""
    t0 = clock()
    while True:
        seen = source.observe(clock() - t0)
        if isinstance(seen, Ended):
            if seen.said:
                line.say(seen.said)
            return seen.result
        if isinstance(seen, Observation):
            ended = _act(source, policy, line, seen, lambda: clock() - t0)
            if ended is not None:
                return ended.result
        else:
            line.say(seen)
        sleep(poll_s)


def _act(source: Source, policy: Policy, line: WatchLine, o: Observation,
         elapsed: Callable[[], float]) -> Optional[Ended]:
    """One observation through the policy, and what its decision asks: the watch's end, or None (go on)."""
    steady = policy.see(o)
    source.settle(o, steady)
    decision = policy.decide(o)
    if decision is Decision.RUNNING:
        return _running(source, o, policy.looping)
    last_line = o.silent_s if o.wrote else None
    line.say(source.waiting_for(o, steady), last_line)
    if decision is Decision.SAMPLE:
        line.say(f"silent for {seconds(o.silent_s)}: looking at the stacks of its processes{source.stacks_where}",
                 last_line, force=True)
        found = source.sample(o)
        policy.sampled(elapsed())
        if found is not None:
            return Ended(found)
        decision = policy.decide(o)  # the watch may be over: what was seen before the look says so
        if decision is Decision.RUNNING:  # (only at its end: the output was steady)
            return _running(source, o, policy.looping)
    if decision is Decision.OUT_OF_TIME:
        line.say("the watch is over: a last look at the job", last_line, force=True)
        result = source.out_of_time(o)
        return None if result is None else Ended(result)
    return None


def _running(source: Source, o: Observation, looping: Optional[str]) -> Optional[Ended]:
    """The watch's end on a job the policy calls running, unless the source saw its output stop meanwhile."""
    result = source.running(o, looping)
    return None if result is None else Ended(result)
