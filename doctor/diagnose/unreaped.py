"""A job whose process has ended while nobody has reaped it yet (a zombie): its recorder, its parent, is stopped
or has not got to it. /proc still lists the process, with the start time that proves it the job's, so every
other test calls it alive; a zombie runs nothing and writes nothing: the job has ended, and "alive but silent"
would be wrong. How it ended is its exit status, which its parent reads when it reaps it and the recorder then
writes into the record: until then it is not known here, and none is made up."""

from __future__ import annotations

from typing import Optional

from dfdoctor.model import Verdict
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord
from dfdoctor.targets import transport

STOPPED = ("T", "t")  # /proc/PID/stat's states of a stopped process: SIGSTOP (T), a tracer's stop (t)


def why(recorder: Optional[int], recorder_state: Optional[str]) -> str:
    """Why the job's process, ended and a zombie, has not been reaped, in words, from its recorder's state letter
    (/proc/PID/stat: read here by launch/local.py, on a target by its agent). Its parent, the recorder, reaps it
    and writes its exit as its last act; until then /proc still lists it, with the start time that proves it the
    job's: alive to every other test."""
    if recorder and recorder_state in STOPPED:
        return f"its recorder (pid {recorder}) is stopped (SIGSTOP, a debugger, a suspended shell)"
    return f"its recorder (pid {recorder}) has not reaped it yet" if recorder else "nobody has reaped it yet"


def ended_unreaped(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The job's process is a zombie (launch/local.py's look saw it): it has ended, its exit not yet known."""
    if live is None or live.unreaped is None or run.finished:
        return None
    stopped = "is stopped" in live.unreaped
    recorder = (run.recorder or {}).get("pid")
    summary = (f"The job has ended: its process (pid {live.pid}) exited and is a zombie that nobody has reaped, "
               f"{'because ' if stopped else 'as '}{live.unreaped}. How it ended (its exit status) is not known "
               "until it is reaped.")
    resume = f"kill -CONT {recorder}"
    if run.is_remote:  # the recorder runs there: the line is typed through ssh/pct/docker
        resume = transport.typed_line(run.target, resume)
    fix = (f"Let the recorder go on (`{resume}`, not tried): it reaps the job and writes its exit; "
           f"then `dfdoctor status {run.id}` says how it ended." if stopped and recorder else
           f"`dfdoctor status {run.id}` again in a moment: the recorder writes the job's exit once it reaps it.")
    evidence = [f"pid {live.pid} (the job) is a zombie: it exited; {live.unreaped}",
                "the record has no exit yet (the recorder writes it once it has reaped the job)"]
    return Verdict("unknown", None, summary, fix, evidence + live.notes)
