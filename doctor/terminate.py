"""SIGTERM during a launch, taken as Ctrl-C is: a CI job's timeout sends it, and the job dfdoctor started runs on
without it. The watch ends (as on Ctrl-C), the verdict of what was seen is printed, then one line says that the job
still runs, its run id and how to look again or stop it, and dfdoctor exits 143 as a process ended by SIGTERM does.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from dfdoctor.run import record
from dfdoctor.run.folder import list_runs
from dfdoctor.run.record import RunRecord
from dfdoctor.targets import Target

EXIT = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM raised where Ctrl-C would be: the watch catches both and judges what it saw."""


class Seen:
    """Whether SIGTERM came while `sigterm_as_interrupt` was in force."""

    def __init__(self) -> None:
        self.terminated = False


def _a_child_dies(parent: int) -> bool:
    """In a forked child that still has `parent`'s handler (between its fork and its own signal set-up): die of
    SIGTERM as a process without a handler does, and say so. False in `parent` itself."""
    if os.getpid() == parent:
        return False
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    return True


@contextmanager
def sigterm_as_interrupt() -> Iterator[Seen]:
    """While in force, the first SIGTERM raises `Terminated` in this process (a later one is only noted: the
    verdict is being printed). A forked child that inherited the handler dies of SIGTERM as before."""
    me, seen = os.getpid(), Seen()

    def on_term(signum: int, frame: Any) -> None:
        if _a_child_dies(me):
            return
        if not seen.terminated:
            seen.terminated = True
            raise Terminated()

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, old)


class _Forking:
    """Whether the main thread is inside `os.fork()` (`forking`), and a SIGTERM that came meanwhile."""

    active = False
    held: Optional[tuple] = None


_FORKING = _Forking()


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While in force (main thread only), SIGTERM raises KeyboardInterrupt as Ctrl-C would, so the `finally` blocks
    of whatever started processes end them (a CI job's timeout sends SIGTERM: the checks' workers, a fleet's
    per-target children and their ssh masters were left running). A handler already in force is called first (a
    launch's notes the SIGTERM to name its run). A SIGTERM inside `forking()` is held for `raise_held_sigterm`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    me, previous = os.getpid(), signal.getsignal(signal.SIGTERM)

    def stop(signum: int, frame: Any) -> None:
        if _a_child_dies(me):
            return
        if _FORKING.active:
            _FORKING.held = (signum, frame)
            return
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def forking() -> Iterator[None]:
    """Around `os.fork()`. Python runs a signal handler at the next bytecode, which can be inside the fork's at-fork
    hooks (logging's `_releaseLock`), where any exception is printed and dropped: a SIGTERM there was lost (CI's
    launch exited 0 for 143). So it is held, and `raise_held_sigterm` raises it once the child is registered."""
    _FORKING.active = True
    try:
        yield
    finally:
        _FORKING.active = False


def raise_held_sigterm() -> None:
    """Raise a SIGTERM held while forking (the caller has registered its child, so it is ended with the rest)."""
    held, _FORKING.held = _FORKING.held, None
    handler = signal.getsignal(signal.SIGTERM)
    if held is not None and callable(handler):
        handler(*held)


def still_running_line(run: dict[str, Any], target: Target, finished: bool) -> str:
    """What dfdoctor says after the verdict when SIGTERM ended its watch: the job's run id, and whether it runs on
    (how to look again and how to stop it) or had already ended."""
    run_id, pid = run.get("id"), run.get("pid")
    if not run_id:
        return "dfdoctor: terminated (SIGTERM) before the job was started: nothing runs."
    look = f"`dfdoctor status {run_id}` looks again"
    if finished:
        return f"dfdoctor: terminated (SIGTERM) while watching run {run_id}; the job had ended. {look}."
    where = "" if target.runs_here else f" on {target}"
    if not pid:
        return f"dfdoctor: terminated (SIGTERM) just after starting run {run_id}{where}: {look}."
    return (f"dfdoctor: terminated (SIGTERM) while watching; the job was started and still runs{where} (run "
            f"{run_id}, pid {pid}): {look}; `dfdoctor stop {run_id}` stops it.")


def started_since(before: set[Path], cwd: Path, run_dir: Optional[Path]) -> Optional[RunRecord]:
    """The run this launch started, when SIGTERM came outside the watch (just after the start, or during the
    post-launch checks): the run folder that was not there before, or the --run-dir."""
    new = [p for p in ([run_dir] if run_dir else list_runs(cwd)) if p not in before and (p / "record.jsonl").exists()]
    return record.load(new[-1]) if new else None
