"""The fix's lines, rehearsed beside the user's own line instead of after it.

A line that fails is rehearsed, then the fix search (fix.find) composes its candidates, one folder at a time, from
what that rehearsal saw, and rehearses each: rehearsals one after the other, each mostly a wait on sessions (the
seed line's check spent 2 s in each, three of them where the script is relative). A candidate needs little of what
the user's rehearsal sees: its plan (the job, its hops, its logs), the interpreter words that exist at the job's
place, and, where the line does not say it, the folder the job started in. So, where the reading already says the
line fails, the first candidate is composed from the plan alone as soon as the user's line is planned, and the
first TRIES candidates once the sentinel is placed and the place said which interpreters it has; each
is rehearsed in a thread beside the user's line. fix.find takes such a rehearsal only for the very line it composes
from what was seen, and rehearses its own otherwise, as before: the fix printed, and the rehearsal that proves it,
are the same either way. Each rehearsal has its own tag, sentinel, renamed logs, wall and cleanup
(leftovers.register, by this worker's pid): they do not see each other.
"""

from __future__ import annotations

import threading
from typing import Optional

from dfdoctor.rehearse import fix
from dfdoctor.rehearse.rewrite import Plan
from dfdoctor.rehearse.runner import Place, Rehearsal, rehearse

# the candidates rehearsed ahead: where a session starts, then the likeliest folder (the search seldom needs a
# third; each one more is a rehearsal's load beside the others on a small machine)
TRIES = 2
JOIN_S = 60.0  # a rehearsal ends within its budget (10 s, plus a slow hop's slack, plus its sweep): a bound only


class _Run(threading.Thread):
    """One candidate line, rehearsed in its own thread."""

    def __init__(self, line: str, where: dict):
        super().__init__(name="fix-ahead", daemon=True)
        self.line, self.where = line, where
        self.got: Optional[Rehearsal] = None

    def run(self) -> None:
        try:
            self.got = rehearse(self.line, **self.where)
        except Exception:  # noqa: BLE001  (the search rehearses the line itself then)
            self.got = None


class Ahead:
    """The fix's candidate lines rehearsed ahead (`planned` is runner.rehearse's hook); `take` hands one to the
    search, `close` waits for them all (nothing of them outlives the check)."""

    def __init__(self, line: str, log: Optional[str], folder: Optional[str] = None, **where):
        self.line, self.log, self.folder, self.where = line, log, folder, where
        self.runs: dict[str, _Run] = {}

    def planned(self, plan: Plan, have: Optional[dict]) -> None:
        """The user's line is planned (`have` None: the first candidate only), or its sentinel placed (`have`: the
        interpreter words there): rehearse the candidates not yet begun."""
        if plan.uncertain or plan.wrapped or plan.job is None:
            return  # the search does not run for such a line (launch.path): nothing to rehearse ahead
        seen = Rehearsal(self.line, plan=plan, places=[Place(plan.job.where, have=have)] if have is not None else [])
        try:
            folders = fix.candidates(seen, self.log, self.folder)[:TRIES]
            lines = [fix.compose(seen, self.log, folder=f) for f in (folders if have is not None else folders[:1])]
        except Exception:  # noqa: BLE001  (a speculation only: the search composes its own lines after)
            return
        for line in lines:
            if line and line not in self.runs:
                self.runs[line] = _Run(line, self.where)
                self.runs[line].start()

    def take(self, line: str) -> Optional[Rehearsal]:
        """The rehearsal of `line` if it was rehearsed ahead (once), else None."""
        run = self.runs.pop(line, None)
        if run is None:
            return None
        run.join(JOIN_S)
        return run.got

    def close(self) -> None:
        """Wait for every rehearsal ahead not taken to end (its `finally` sweeps what it made)."""
        for run in self.runs.values():
            run.join(JOIN_S)
