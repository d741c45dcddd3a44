"""The run folder's own file system filled up while the job ran.

The recorder then stops its copies of the job's output (their byte counts go on) and frees the room it kept
back, so the record still gets its heartbeat and the job's exit (recorder.RunDirSpace). Its `run-dir-full`
event is what this rule reads: without it, a job that writes its --log all along looked silent ("import-hang,
has written nothing"), and a job that ended looked killed with its recorder.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from dfdoctor import causes
from dfdoctor.run.record import RunRecord
from dfdoctor.model import Verdict


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def run_dir_full(run: RunRecord, live: Optional[Any]) -> Optional[Verdict]:
    """Before the rules that judge a live job by its output, and a vanished recorder by its silence: with the
    run folder full, those readings are about dfdoctor's copies, not about the job. A recorded exit speaks for
    itself (the rules before this one)."""
    ev = run.first("run-dir-full")
    if not ev or run.exit:
        return None
    where = run.dir
    evidence = [f"the run folder's file system is full ({ev.get('errname')}) since {_clock(ev.get('at') or ev['t'])}"
                f": the copies of the job's output in {where} stopped there",
                f"output the job wrote so far: {run.output_bytes()} bytes"
                + (f"; its log {run.spec.get('log')} still gets all of it" if run.spec.get("log") else "")]
    fix = (f"Free space where the run folder lives (df -h {where}), or launch with --run-dir on another file "
           "system.")
    if live is not None and run.output_bytes() > 0:
        return Verdict("running", causes.DISK_FULL, f"The job is running (pid {live.pid}) and writing, but the run "
                       "folder's file system is full: dfdoctor's copies of its output stopped.", fix, evidence)
    if live is None and not run.recorder_alive() and not run.job_alive():
        return Verdict("unknown", causes.DISK_FULL, "The job ended, but the run folder's file system was full: "
                       "its recorder could not write how it ended.", fix,
                       evidence + [f"the recorder (pid {(run.recorder or {}).get('pid')}) is gone"])
    return None
