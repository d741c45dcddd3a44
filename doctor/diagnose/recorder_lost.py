"""The recorder alone was killed (SIGKILL, an OOM kill of the recorder, a crash) while the job ran.

Its stand-in (recorder.stand_in) holds the job's output pipes too: the job does not die of a broken pipe, its
output still reaches --log, and the record says when the recorder was lost (`recorder-lost`) and when the job
closed its output (`stand-in-end`). What only the recorder could see, the job's exit status, is not known then,
and the verdict says so instead of blaming a session end or a hard kill of both.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from dfdoctor.run.record import RunRecord
from dfdoctor.model import Verdict


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def recorder_lost(run: RunRecord, live: Optional[Any]) -> Optional[Verdict]:
    """Before recorder_vanished: a recorder that was lost alone, with the job going on without it."""
    lost = run.first("recorder-lost")
    if not lost or run.exit:
        return None
    evidence = [f"the recorder (pid {lost.get('recorder_pid')}) was killed at about {_clock(lost['t'])}, without "
                "writing the job's exit", f"its stand-in (pid {lost.get('pid')}) took over the job's output"
                + (f" and went on writing it to {run.spec.get('log')}" if run.spec.get("log") else "")]
    fix = ("Find who killed the recorder (an OOM daemon, a user's kill -9 on its pid, a crash: recorder.out in the "
           "run folder); relaunch with `dfdoctor launch` to have the job recorded again.")
    end = run.first("stand-in-end")
    if end is None and (live is not None or run.job_alive()):
        return Verdict("running", None, "The job still runs, but its recorder was killed: its output still goes to "
                       "the log, no longer to the run folder.", fix, evidence)
    if end is not None:
        evidence.append(f"the job closed its output at {_clock(end['t'])}")
        return Verdict("unknown", None, "The job ended after its recorder was killed; how it ended (its exit "
                       "status) only the recorder could have seen.", "Read the end of the log. " + fix, evidence)
    return None
