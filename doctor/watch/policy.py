"""The watch's policy: what to do next, from what the watch sees now. Observations go in, a decision comes out;
no clock is read and nothing is done here, so the rules are tested with observations they are handed.

A source (this machine's processes, a target's agent, Slurm) observes; the watch's driver (loop.py) acts on the
decision:
  WAIT        nothing certain yet: look again after the poll interval
  SAMPLE      the job is silent past its own rhythm: look at the stacks of all its processes
  RUNNING     settled, its output growing at its pace: one look at the stacks first, then `running`
  OUT_OF_TIME the watch is over: judge the job as it is now
(the source says ENDED and STUCK itself: a death is read from the record or from Slurm, a wait from a look's
finding).

The rules are those of docs/launch.md: output is steady when it grew in a few separate bursts over STEADY_S, or at
a rhythm the job showed since the watch began; output back after a silence longer than the job's quiet time must
show its pace again; `running` needs the settle time of output (from the first line) or the job's loop, no loop
about to reach its total, and for torchrun every rank settled for the settle time again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from dfdoctor.watch import rhythm, settle

STEADY_S = 2.0  # output must keep coming for this long before we call the job running
STEADY_BURSTS = 3  # ...seen growing this many separate times (the recorder's heartbeat counts once a second)
SAMPLE_S = 4.0  # a quiet job's stacks are sampled at most this often during the watch


class Decision(Enum):
    WAIT = "wait"
    SAMPLE = "sample"
    RUNNING = "running"
    OUT_OF_TIME = "out of time"


@dataclass
class Observation:
    """What a source saw of a live job at one moment. `t`: seconds since the watch began (the watch's clock);
    the other times are the job's machine's, already made into ages."""

    t: float
    alive: bool  # the job (not only its recorder) is alive
    progress: int  # lines that show progress so far (or the bytes its own log grew by)
    silent_s: float  # since its last output (since its start when it wrote none)
    talking_s: float  # since its first output (its age before it wrote any)
    heartbeat: dict[str, Any] = field(default_factory=dict)  # the pace and the loop (rhythm, settle read them)
    fresh: bool = False  # the heartbeat was written since the watch began (its rhythm is the job's pace now)
    unsettled: Optional[str] = None  # why not every process it should have is up (None: nothing to wait for)
    settle_checked: bool = True  # the settle check ran on this observation (it runs once a second)
    ranks_settled_s: Optional[float] = None  # seconds since every rank was seen past init_process_group
    can_sample: bool = True  # its stacks can be looked at from here
    wrote: bool = False  # it wrote output (the progress line gives the age of its last)


class Policy:
    """One watch's memory between observations (the output's growth, when it last looked) and its rules."""

    def __init__(self, watch_s: float, settle_s: float, steady_s: float = STEADY_S) -> None:
        self.watch_s, self.settle_s, self.steady_s = watch_s, max(0.0, min(settle_s, watch_s)), steady_s
        self.growth: list[tuple[float, int]] = []  # (when, progress) each time the output was seen to grow
        self.level = 0  # the progress seen last (what the next growth is counted from)
        self.revived = False  # the output came back after a silence: its pace over the job's life says nothing
        self.last_sample = -SAMPLE_S
        self.steady = False  # as of the last observation (the progress line says what it waits for)
        self.looping: Optional[str] = None  # the evidence that the job is in its loop, when that showed it
        self._seen: Optional[Observation] = None  # the observation `see` took in last

    def see(self, o: Observation) -> bool:
        """Take in an observation's output; whether the output is steady now (the settle check looks deeper at
        the ranks once it is: its answer goes into the observation that `decide` is then handed)."""
        prev = self._seen
        if prev is not None and o.silent_s < prev.silent_s and prev.silent_s >= rhythm.quiet_after(prev.heartbeat):
            # output back after a silence, seen in its time (the log's, the heartbeat's) before its lines are
            # counted: the bursts from before the silence say nothing of the job now (CI: they made it steady at
            # the first sign of the one line after a 12 s silence, and the job died 3 s later)
            self.growth, self.revived = [], True
        if o.progress > self.level:
            if self.growth and self._silence_before(o) >= rhythm.quiet_after(self._seen.heartbeat if self._seen
                                                                                  else o.heartbeat):
                # output back after a silence (a compile, a busy index build): one line is not steady output
                # again; the job shows its pace anew, or dies in the seconds after that line
                self.growth, self.revived = [], True
            elif not self.growth and rhythm.came_back(o.heartbeat):  # the silence came before the watch began
                self.revived = True
            self.growth.append((o.t, o.progress))
            self.level = o.progress
        hb = o.heartbeat
        self.steady = ((len(self.growth) >= STEADY_BURSTS and o.t - self.growth[0][0] >= self.steady_s) or
                       (not self.revived and rhythm.interval(hb) is not None and o.fresh)) and \
            rhythm.still_growing(hb, o.silent_s)
        self._seen = o
        return self.steady

    def _silence_before(self, o: Observation) -> float:
        """How long the job was silent before the output `o` shows: the gap the watch saw between two growths, or
        the job's own silence at the last observation, which runs from before the watch began (a watch that
        started late saw the job's first lines and its long silence as one growth; CI: then the one line after
        the silence counted as steady output). Measured against the job's rhythm before that line: the line
        itself stretches the rhythm it is judged by."""
        gap = o.t - self.growth[-1][0]
        prev = self._seen
        if prev is not None:
            gap = max(gap, prev.silent_s + (o.t - prev.t) - o.silent_s)
        return gap

    def decide(self, o: Observation) -> Decision:
        """What to do after this observation (`see` took it in first; `decide` alone sees it too): the first of
        the rules below that speaks, else WAIT."""
        if self._seen is not o:
            self.see(o)
        self.looping = settle.in_its_loop(o.heartbeat, self.settle_s) if self.steady else None
        for rule in (self._settled, self._silent_past_its_rhythm, self._watch_over):
            decision = rule(o)
            if decision is not None:
                return decision
        return Decision.WAIT

    def _ripe(self, o: Observation) -> bool:
        """Steady output past the settle time, which runs from the job's first output (a job in its loop is past
        its start sooner) and for torchrun again from when every rank was seen past init_process_group (a rank
        that dies in its first seconds of training is not missed); no loop about to reach its total (a phase:
        what follows it, a compile that hangs or a crash, is waited for)."""
        if not self.steady:
            return False
        past_start = o.talking_s >= self.settle_s or self.looping is not None
        ranks_settled = o.ranks_settled_s is None or o.ranks_settled_s >= self.settle_s
        return past_start and ranks_settled and settle.about_to_end(o.heartbeat, self.settle_s) is None

    def _settled(self, o: Observation) -> Optional[Decision]:
        """RUNNING: ripe, every process it should have up (checked on this very observation), alive."""
        if self._ripe(o) and o.unsettled is None and o.settle_checked and o.alive:
            return Decision.RUNNING
        return None

    def _silent_past_its_rhythm(self, o: Observation) -> Optional[Decision]:
        """SAMPLE: silent past its own rhythm, and the last look is SAMPLE_S old."""
        due = o.t - self.last_sample >= SAMPLE_S
        if o.can_sample and o.alive and due and o.silent_s >= rhythm.sample_after(o.heartbeat):
            return Decision.SAMPLE
        return None

    def _watch_over(self, o: Observation) -> Optional[Decision]:
        """At the watch's end: RUNNING when the output is steady now (the settle time ends with the watch),
        else OUT_OF_TIME (judge the job as it is)."""
        if o.t < self.watch_s:
            return None
        if self.steady and o.unsettled is None and o.alive:
            return Decision.RUNNING
        return Decision.OUT_OF_TIME

    def sampled(self, t: float) -> None:
        """A look at the stacks was taken at `t` (the next comes SAMPLE_S later at the soonest)."""
        self.last_sample = t
