"""Run a probe script in the training interpreter: killable, bounded, and never in dfdoctor's own process.

A probe is a standard-library Python file (usually under `checks/probes/`) that does the risky work
(import torch, import user code, init CUDA) and writes one JSON document to the path in
`$DFDOCTOR_PROBE_OUT`. It runs in its own session and process group; at the deadline the group first gets
SIGUSR1 (a probe that called `install_stack_dump()` prints every thread's stack to stderr) and then SIGKILL,
so a hang becomes evidence instead of a stuck dfdoctor.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import checks.probes as _probes_pkg

from .capture import DEFAULT_LIMIT, CappedBuffer

PROBES_DIR = Path(_probes_pkg.__file__).resolve().parent
STACK_GRACE_S = 0.7  # time between SIGUSR1 (dump stacks) and SIGKILL


@dataclass
class ProbeOutcome:
    """What happened to one probe run."""

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
        """The name of the signal that ended the probe, if one did."""
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


def run_command(argv: Sequence[str], *, timeout: float, cwd: Optional[os.PathLike] = None,
                env: Optional[dict[str, str]] = None, stdin_data: Optional[bytes] = None,
                limit: int = DEFAULT_LIMIT, stack_signal: Optional[int] = signal.SIGUSR1) -> ProbeOutcome:
    """Run argv in a new session; capture capped stdout/stderr; kill its whole group at `timeout`."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, start_new_session=True,
                                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return ProbeOutcome(list(argv), None, "", "", time.monotonic() - start,
                            spawn_error=f"{type(exc).__name__}: {exc.strerror or exc}")
    if stdin_data is not None:
        try:
            proc.stdin.write(stdin_data)
        except BrokenPipeError:
            pass
        proc.stdin.close()
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    deadline = start + timeout
    timed_out = False
    stage = 0  # 0 running, 1 asked for stacks, 2 killed
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline and stage == 0:
            timed_out = True
            if stack_signal is not None:
                kill_group(proc.pid, stack_signal)
                deadline = now + STACK_GRACE_S
                stage = 1
            else:
                stage = 1
                deadline = now
            continue
        if now >= deadline and stage == 1:
            kill_group(proc.pid)
            stage = 2
            deadline = now + 2.0
        if now >= deadline and stage == 2:
            break  # a grandchild holds the pipe open after the kill: stop reading, report what we have
        for key, _ in sel.select(timeout=max(0.0, min(0.25, deadline - now))):
            chunk = os.read(key.fd, 65536)
            if chunk:
                key.data.write(chunk)
            else:
                sel.unregister(key.fileobj)
    sel.close()
    kill_group(proc.pid)  # nothing the probe started may outlive it
    proc.stdout.close()
    proc.stderr.close()
    rc = proc.wait()
    return ProbeOutcome(list(argv), rc, out.text(), err.text(), time.monotonic() - start, timed_out=timed_out)


def run_probe(ctx, script: str | os.PathLike, args: Sequence[str] = (), *, timeout: Optional[float] = None,
              env: Optional[dict[str, str]] = None, cwd: Optional[os.PathLike] = None) -> ProbeOutcome:
    """Run a probe script with the training interpreter (`ctx.python`) in the job's cwd and environment.

    `script` is a path, or a bare file name under `checks/probes/`. The probe's JSON answer, if it wrote
    one, is in `outcome.payload`.
    """
    path = Path(script)
    if not path.is_absolute() and not path.exists():
        path = PROBES_DIR / path
    run_env = dict(ctx.env if env is None else env)
    fd, out_path = tempfile.mkstemp(prefix="dfdoctor-probe-", suffix=".json")
    os.close(fd)
    run_env["DFDOCTOR_PROBE_OUT"] = out_path
    run_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    try:
        outcome = run_command([ctx.python, str(path), *args], timeout=timeout or ctx.timeout or 60.0,
                              cwd=cwd or ctx.cwd, env=run_env)
        try:
            text = Path(out_path).read_text()
            outcome.payload = json.loads(text) if text.strip() else None
        except (OSError, ValueError):
            outcome.payload = None
        return outcome
    finally:
        try:
            os.unlink(out_path)
        except OSError:
            pass
