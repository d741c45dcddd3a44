"""The first round of the stack look that `running` waits for, taken while the job is about to earn it.

`running` is said after one look at the stacks of every process, two rounds a second apart (a compile-lock cycle
while other threads print is a deadlock, not a running job). Both rounds used to follow the moment the job was
ripe, so the verdict came a second and more after the evidence (issue 45). Now the watch takes the first round
when the job will be ripe within a gap at its pace (settle.ripe_within), again each gap while it is not yet; the
look then takes only its second round, a gap after the first at the soonest, after ripeness as before. A first
round that is older than three gaps, or saw other processes than the tree has now, is not used
(jobstacks.sample_job): the look takes both rounds then.
"""

from __future__ import annotations

import threading
import time
from typing import Optional

from dfdoctor.diagnose import jobstacks


class LookAhead:
    """One first round at a time, taken in a thread while the watch goes on."""

    def __init__(self) -> None:
        self.round: Optional[jobstacks.Round] = None
        self.thread: Optional[threading.Thread] = None

    def keep_fresh(self, pid: int) -> None:
        """Take a first round now, unless one is under way or began less than a gap ago."""
        if self.thread is not None and self.thread.is_alive():
            return
        if self.round is not None and time.monotonic() - self.round.began < jobstacks.GAP_S:
            return
        self.thread = threading.Thread(target=self._take, args=(pid,), name="dfdoctor-look-ahead", daemon=True)
        self.thread.start()

    def _take(self, pid: int) -> None:
        try:
            self.round = jobstacks.first_round(pid)
        except Exception:  # a look ahead that fails costs nothing: the look takes both rounds itself
            self.round = None

    def take(self) -> Optional[jobstacks.Round]:
        """The first round taken ahead, once (a round under way is waited for: the look would take one now)."""
        self.close()
        taken, self.round = self.round, None
        return taken

    def close(self) -> None:
        """Wait for a round under way (its py-spy runs end with it: nothing is left running)."""
        if self.thread is not None:
            self.thread.join(timeout=jobstacks.DUMP_TIMEOUT_S + 1.0)
            self.thread = None
