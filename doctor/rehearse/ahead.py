"""The fix's first line, rehearsed beside the user's own line instead of after it.

A line that fails is rehearsed, then the fix search (fix.find) composes its first candidate from what that
rehearsal saw and rehearses it: two rehearsals one after the other, each mostly a wait on sessions (the seed line's
check spent 2 s in each). The first candidate needs little of what the user's rehearsal sees: its plan (the job, its
hops, its logs), and only where the line does not say them, the interpreter that exists at the job's place and the
folder the job started in. So, where the reading already says the line fails, the candidate is composed from the
plan alone as soon as the user's line is planned, and rehearsed in a thread beside it. fix.find takes that rehearsal
only for the very line it composes from what was seen, and rehearses its own otherwise, as before: the fix printed,
and the rehearsal that proves it, are the same either way. Each rehearsal has its own tag, sentinel, renamed logs,
wall and cleanup (leftovers.register, by this worker's pid): the two do not see each other.
"""

from __future__ import annotations

import threading
from typing import Optional

from dfdoctor.rehearse import fix
from dfdoctor.rehearse.rewrite import Plan
from dfdoctor.rehearse.runner import Rehearsal, rehearse

JOIN_S = 60.0  # a rehearsal ends within its budget (10 s, plus a slow hop's slack, plus its sweep): a bound only


class Ahead:
    """One fix line rehearsed ahead (`planned` is runner.rehearse's hook); `take` hands its rehearsal to the
    search, `close` waits for it (nothing of it outlives the check)."""

    def __init__(self, log: Optional[str], **where):
        self.log, self.where = log, where
        self.line: Optional[str] = None
        self._thread: Optional[threading.Thread] = None
        self._got: Optional[Rehearsal] = None

    def planned(self, plan: Plan) -> None:
        """The user's line is planned: compose the first candidate from the plan alone and rehearse it beside."""
        if plan.uncertain or plan.wrapped:
            return  # the search does not run for such a line (launch.path): nothing to rehearse ahead
        try:
            line = fix.compose(Rehearsal("", plan=plan), self.log)  # no places: nothing seen yet
        except Exception:  # noqa: BLE001  (a speculation only: the search composes its own line after)
            return
        if not line:
            return
        self.line = line
        self._thread = threading.Thread(target=self._run, args=(line,), name="fix-ahead", daemon=True)
        self._thread.start()

    def _run(self, line: str) -> None:
        try:
            self._got = rehearse(line, **self.where)
        except Exception:  # noqa: BLE001  (the search rehearses the line itself then)
            self._got = None

    def take(self, line: str) -> Optional[Rehearsal]:
        """The rehearsal of `line` if it is the one rehearsed ahead (once), else None."""
        if line != self.line or self._thread is None:
            return None
        self.line = None
        self._thread.join(JOIN_S)
        return self._got

    def close(self) -> None:
        """Wait for the rehearsal ahead to end (its `finally` sweeps what it made), used or not."""
        if self._thread is not None:
            self._thread.join(JOIN_S)
