"""The first round of the stack look that `running` waits for, taken while the job is about to earn it.

`running` is said after one look at the stacks of every process, two rounds a second apart (a compile-lock cycle
while other threads print is a deadlock, not a running job). Both rounds used to follow the moment the job was
ripe, so the verdict came a second and more after the evidence (issue 45). Now the watch takes first rounds while
the job will be ripe within AHEAD_S at its pace (settle.ripe_within), and the look takes only its second round, a
gap after the first round's reads ended at the soonest, after ripeness as before.

Which first round: a round serves a look one to AHEAD_GAPS gaps after its reads ended (jobstacks.sample_job:
under load py-spy may take most of a gap to start, and the gap counts from the reads); the look takes the youngest
round that is a gap old already, so it waits for none of the gap. A new round is taken only when the youngest
began RENEW_GAPS gaps ago: the one before it still serves while the new one ages into a gap (its age counts from
its end, the renewal from its start, so the new round ripens about when the old one stops serving). (A
round renewed every gap was a few milliseconds old at the moment the job ripened as often as not, since the job
ripens on a line of its pace: the look then waited the whole gap, 0.4 s in the median of issue 45's bench.) A
round still under way is waited for only when no finished round serves.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Optional

from dfdoctor.diagnose.look_times import AHEAD_GAPS, DUMP_TIMEOUT_S, GAP_S

if TYPE_CHECKING:  # start-up: the looks (and psutil) are imported by the first round taken (_take)
    from dfdoctor.diagnose.jobstacks import Round

AHEAD_S = 2 * GAP_S  # first rounds are taken while the job ripens within this: the first one is a gap
#                                old or more when it does (a round taken a gap ahead was, at the job's pace, some
#                                milliseconds short of it as often as not)
RENEW_GAPS = 2  # a new round when the youngest is this many gaps old (the one before serves up to AHEAD_GAPS)


class LookAhead:
    """First rounds taken in a thread while the watch goes on; a look takes the one that serves it best."""

    def __init__(self) -> None:
        self.rounds: list[Round] = []  # finished rounds, oldest first
        self.lock = threading.Lock()  # the thread adds to `rounds` while the watch reads them
        self.thread: Optional[threading.Thread] = None

    def keep_fresh(self, pid: int) -> None:
        """Take a first round now, unless one is under way or the youngest began less than RENEW_GAPS gaps ago."""
        if self.thread is not None and self.thread.is_alive():
            return
        rounds = self._serving()
        with self.lock:
            self.rounds = rounds  # those too old to serve are let go
        if rounds and time.monotonic() - rounds[-1].began < RENEW_GAPS * GAP_S:
            return
        self.thread = threading.Thread(target=self._take, args=(pid,), name="dfdoctor-look-ahead", daemon=True)
        self.thread.start()

    def _take(self, pid: int) -> None:
        try:
            from dfdoctor.diagnose import jobstacks  # start-up: see TYPE_CHECKING above
            taken = jobstacks.first_round(pid)
        except Exception:  # a look ahead that fails costs nothing: the look takes both rounds itself
            taken = None
        if taken is not None:
            with self.lock:
                self.rounds.append(taken)

    def take(self) -> Optional[Round]:
        """The round that serves a look now, once: the youngest that is a gap old, else (a round under way is
        waited for first) the oldest that still serves. None: the look takes both rounds."""
        if _ripe(self._serving()) is None:
            self.close()
        rounds = self._serving()
        with self.lock:
            self.rounds = []
        ripe = _ripe(rounds)
        return ripe if ripe is not None else (rounds[0] if rounds else None)

    def _serving(self) -> list[Round]:
        """The finished rounds that can still serve a look (ended AHEAD_GAPS gaps ago at the most), oldest first."""
        now = time.monotonic()
        with self.lock:
            return [r for r in self.rounds if now - r.ended <= AHEAD_GAPS * GAP_S]

    def close(self) -> None:
        """Wait for a round under way (its py-spy runs end with it: nothing is left running)."""
        if self.thread is not None:
            self.thread.join(timeout=DUMP_TIMEOUT_S + 1.0)
            self.thread = None


def _ripe(rounds: list[Round]) -> Optional[Round]:
    """The youngest of `rounds` whose reads ended a gap ago or more (a look takes its second round at once)."""
    now = time.monotonic()
    ripe = [r for r in rounds if now - r.ended >= GAP_S]
    return ripe[-1] if ripe else None
