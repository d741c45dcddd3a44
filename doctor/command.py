"""Run one command killably: its own session and process group, capped output, a deadline that kills the group.

Both the probes (`dfdoctor.probe`) and the target sessions (`dfdoctor.targets`, `dfdoctor.launch.remote_run`)
run their subprocesses through `run_command`; this module imports nothing else from dfdoctor but `capture`, so
any of them may import it at the top.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from dfdoctor.capture import DEFAULT_LIMIT, CappedBuffer

STACK_GRACE_S = 0.7  # time between SIGUSR1 (dump stacks) and SIGKILL


@dataclass
class ProbeOutcome:
    """What happened to one command: a probe, a session on a target, a tool run once."""

    argv: list[str]
    returncode: Optional[int]
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    payload: Optional[dict[str, Any]] = None
    spawn_error: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def signal(self) -> Optional[str]:
        """The name of the signal that ended the command, if one did."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a whole process group, ignoring one that is already gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# A command closes its pipes a moment before it exits (coreutils close stdout and stderr in an atexit handler):
# the group is killed only once the command itself has ended, or this long after its pipes closed, so that a
# command that finished is never reported as killed.
EXIT_GRACE_S = 0.5


def _await_exit(pid: int, within: float) -> None:
    """Wait until `pid` has exited (left unreaped, so its process group id stays ours to signal), or `within`."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.002)


def run_command(argv: Sequence[str], *, timeout: float, cwd: Optional[os.PathLike] = None,
                env: Optional[dict[str, str]] = None, stdin_data: Optional[bytes] = None,
                limit: int = DEFAULT_LIMIT, stack_signal: Optional[int] = signal.SIGUSR1,
                hold_stdin: bool = False) -> ProbeOutcome:
    """Run argv in a new session; capture capped stdout/stderr; kill its whole group at `timeout`.

    With `hold_stdin` the child's stdin stays open until it ends: a remote bootstrap reads EOF there as
    "dfdoctor is gone, kill everything".
    """
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, start_new_session=True,
                                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return ProbeOutcome(list(argv), None, "", "", time.monotonic() - start,
                            spawn_error=f"{type(exc).__name__}: {exc.strerror or exc}")
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    # stdin is fed from the same loop, never by a blocking write: a child that does not read (an ssh still
    # connecting, a hung docker daemon) must not stall dfdoctor past the deadline.
    pending = memoryview(stdin_data or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        if pending:
            sel.register(proc.stdin, selectors.EVENT_WRITE, None)
        elif not hold_stdin:
            proc.stdin.close()

    def feed(key) -> None:
        nonlocal pending
        pending = _feed(key.fd, pending)
        if not pending:
            sel.unregister(proc.stdin)
            if not hold_stdin:
                proc.stdin.close()

    timed_out = pump(sel, proc.pid, start + timeout, stack_signal, on_other=feed)
    sel.close()
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    if not timed_out:
        _await_exit(proc.pid, EXIT_GRACE_S)
    kill_group(proc.pid)  # nothing the command started may outlive it
    proc.stdout.close()
    proc.stderr.close()
    rc = proc.wait()
    return ProbeOutcome(list(argv), rc, out.text(), err.text(), time.monotonic() - start, timed_out=timed_out)


def pump(sel: selectors.BaseSelector, pgid: int, deadline: float, stack_signal: Optional[int],
         on_other=None) -> bool:
    """Read every registered pipe (its key's data is the buffer it fills) until all are closed, or until the
    deadline: then signal the group `stack_signal` (dump stacks), wait STACK_GRACE_S, and SIGKILL it. Keys whose
    data is None go to `on_other`. Whether the deadline passed."""
    timed_out = False
    stage = 0  # 0 running, 1 asked for stacks, 2 killed
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline and stage == 0:
            timed_out = True
            if stack_signal is not None:
                kill_group(pgid, stack_signal)
                deadline = now + STACK_GRACE_S
            else:
                deadline = now
            stage = 1
            continue
        if now >= deadline and stage == 1:
            kill_group(pgid)
            stage = 2
            deadline = now + 2.0
        if now >= deadline and stage == 2:
            break  # a grandchild holds the pipe open after the kill: stop reading, report what we have
        for key, _ in sel.select(timeout=max(0.0, min(0.25, deadline - now))):
            if key.data is None:
                on_other(key)
                continue
            chunk = os.read(key.fd, 65536)
            if chunk:
                key.data.write(chunk)
            else:
                sel.unregister(key.fileobj)
    return timed_out


def _feed(fd: int, pending: memoryview) -> memoryview:
    """Write what the pipe takes now; what is left (nothing once the reader is gone: its loss, not ours)."""
    try:
        return pending[os.write(fd, pending[:65536]):]
    except BlockingIOError:
        return pending
    except OSError:  # EPIPE: the child exited or closed its stdin
        return pending[:0]
