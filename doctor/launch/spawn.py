"""Start a job detached under the flight recorder: the recorder is started here, and it starts the job.

Detaching is where a launch from an ssh or `pct exec` session goes wrong: a job started from a session that
returns at once loses the race against the session's SIGHUP. We ignore SIGHUP *before* forking (so the
child can never receive it between fork and setsid), start a new session, read stdin from /dev/null and
send output to files: of the detaching strategies measured, only this and tmux survived 5/5.

This module is the start alone, apart from the watch (launch/local.py): `launch` imports only it before its job
starts, and the watch's modules while the job starts (issue 45).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from dfdoctor.agent import ship
from dfdoctor.agent.names import RECORDER_OUT, SPEC
from dfdoctor.agent.procfs import proc_start_time
from dfdoctor.run import record
from dfdoctor.run.folder import RunFolder
from dfdoctor.run.masks import masked
from dfdoctor.safefile import write_atomically

START_TIMEOUT_S = 10.0  # the recorder must say hello within this, or it is broken
HELLO_POLL_S = 0.025  # how often its hello is looked for, when it runs under another interpreter than ours

Spawner = Callable[..., subprocess.Popen]  # (argv, env, cwd, out_path, stdin_data=None) -> Popen


def spawn_detached(argv: list[str], env: dict[str, str], cwd: Path, out_path: Path,
                   stdin_data: Optional[bytes] = None) -> subprocess.Popen:
    """Start argv so that it outlives us, our terminal and our session: the one place a remote variant replaces.
    `stdin_data` is written to its stdin, which is then closed (its stdin is /dev/null without it)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # inherited across fork and exec, so no race
    out = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        proc = subprocess.Popen(argv, env=env, cwd=str(cwd), stdout=out, stderr=out, start_new_session=True,
                                close_fds=True,
                                stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE)
    finally:
        os.close(out)
        signal.signal(signal.SIGHUP, previous)
    if proc.stdin is not None:
        try:
            proc.stdin.write(stdin_data)
        except BrokenPipeError:
            pass  # it died before reading: the caller sees it say nothing
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
    return proc


def _watch_pids() -> list[dict[str, Any]]:
    """The launching processes the recorder keeps an eye on: their end dates the session's end."""
    out = [{"role": "dfdoctor", "pid": os.getpid()}]
    sid = os.getsid(0)
    if sid not in (0, 1, os.getpid()):
        out.append({"role": "session", "pid": sid})
    for w in out:
        w["start_ticks"] = proc_start_time(w["pid"])
    return out


def _launcher_facts(env: dict[str, str]) -> dict[str, Any]:
    """Who launched: our pid, session, terminal (if any) and ssh connection, for the record."""
    tty = None
    for fd in (0, 1, 2):
        try:
            tty = os.ttyname(fd)
            break
        except OSError:
            continue
    return {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "tty": tty,
            "ssh_connection": env.get("SSH_CONNECTION"), "uid": os.getuid()}


def recorder_python(python: str, env: dict[str, str]) -> str:
    """The training interpreter when it runs at all, else ours: the recorder needs only the standard library."""
    found = python if os.sep in python else shutil.which(python, path=env.get("PATH"))
    return found if found and os.access(found, os.X_OK) else sys.executable


def start(command: list[str], *, cwd: Path, env: dict[str, str], python: str, run_id: str, run_dir: Path,
          log: Optional[Path], redirect: bool = True, memory_limit: Optional[int] = None,
          spawner: Spawner = spawn_detached) -> subprocess.Popen:
    """Write the run's spec, masked, and start the recorder on it (it starts the job). The unmasked spec goes to
    the recorder through its stdin: the run folder never holds it."""
    spec = {"run_id": run_id, "argv": list(command), "cwd": str(cwd), "log": str(log) if log else None,
            "redirect": bool(redirect), "memory_limit": memory_limit, "python": python,
            "watch_pids": _watch_pids(), "launcher": _launcher_facts(env), "started_by": "dfdoctor launch"}
    write_atomically(run_dir / SPEC, json.dumps(masked(spec, env, command), indent=1), private=True)
    raw = json.dumps(spec).encode()
    interp = recorder_python(python, env)
    out = run_dir / RECORDER_OUT
    # (-S: the recorder needs the standard library alone, and the job's start waits for it)
    proc = spawner(ship.here_argv(interp, "recorder", str(run_dir), "-", site=False), env, cwd, out, stdin_data=raw)
    folder = RunFolder.at(run_dir)
    if interp != sys.executable and _failed_to_start(proc, run_dir):
        # the training interpreter could not run even the standard-library recorder: use ours
        folder.append_event("recorder-fallback", python=interp, output=out.read_text(errors="replace")[-2000:])
        proc = spawner(ship.here_argv(sys.executable, "recorder", str(run_dir), "-", site=False), env, cwd, out,
                       stdin_data=raw)
    folder.append_event("launched", recorder_pid=proc.pid, argv=list(command))
    return proc


def _failed_to_start(proc: subprocess.Popen, run_dir: Path) -> bool:
    """The recorder exited without a word. A slow one is left alone: two recorders would start two jobs."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if record.load(run_dir).recorder:
            return False
        if proc.poll() is not None:
            return not record.load(run_dir).recorder
        time.sleep(HELLO_POLL_S)
    return False
