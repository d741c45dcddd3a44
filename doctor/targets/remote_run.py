"""Start a job on a target the way that survives there, and look at it again later: the remote half of
`launch` and `status` (the launch engineer's `doctor/launch.py` does the local half).

The job is wrapped in a tiny shell that records its pid, then its exit status, in a run folder on the target:
`sh -c 'echo $$ >pid; "$@"; echo $? >rc' sh ARGV...`, started with the strategy `persistence.session` found best
for the target (or `nohup setsid -f` and a pause). `observe` reads pid, exit status and log growth in one session.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Optional, Sequence

from . import parse_target, transport
from .shell import quote
from .strategies import BY_NAME, best_for

WRAP = 'echo $$ > "$0/pid"; "$@"; echo $? > "$0/rc"'
LOOK = """r=$1; log=$2; gap=$3
size() { if [ -f "$log" ]; then wc -c < "$log"; else echo -1; fi; }
a=$(size); sleep "$gap"; b=$(size)
pid=$(cat "$r/pid" 2>/dev/null); rc=$(cat "$r/rc" 2>/dev/null)
alive=0; [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
echo "pid=$pid"; echo "rc=$rc"; echo "alive=$alive"; echo "before=$a"; echo "after=$b"
"""


@dataclass
class RemoteRun:
    """A job started on a target: where its run folder and log are, and the line that started it."""

    target: str
    run_dir: str
    log: str
    line: str
    strategy: str
    start_error: Optional[str] = None
    session_s: float = 0.0


@dataclass
class Observation:
    """What a fresh session sees of a remote run."""

    pid: Optional[int]
    alive: bool
    exit_code: Optional[int]
    log_bytes: tuple[int, int]
    error: Optional[str] = None
    facts: dict = field(default_factory=dict)

    @property
    def growing(self) -> bool:
        """Whether the log grew while we watched."""
        return self.log_bytes[1] > max(self.log_bytes[0], 0)


def _call(target_spec: str, script: str, args: Sequence[str], timeout: float):
    """One short session on the target (a killable subprocess)."""
    from doctor.probe import run_command  # imported late: doctor.probe imports this package
    target = parse_target(target_spec)
    out = run_command(transport.wrap(target, ["sh", "-c", script, "sh", *args]), timeout=timeout, stack_signal=None)
    return out, transport.transport_error(target, out.returncode, out.stderr)


def start(target_spec: str, argv: Sequence[str], *, log: str, cwd: Optional[str] = None, python: str = "python3",
          strategy: Optional[str] = None, run_dir: Optional[str] = None, timeout: float = 20.0) -> RemoteRun:
    """Start argv detached on the target, logging to `log` (a path on the target); returns at once."""
    name = strategy if strategy and strategy != "auto" else (best_for(target_spec) or "nohup-setsid-f-wait")
    run_dir = run_dir or f"/tmp/dfdoctor-runs/{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    wrapped = ["sh", "-c", WRAP, run_dir, *argv]
    line = BY_NAME[name].line(wrapped, log, name=uuid.uuid4().hex[:8], python=python)
    line = f"mkdir -p {quote(run_dir)} && " + (f"cd {quote(cwd)} && {line}" if cwd else line)
    began = time.monotonic()
    out, err = _call(target_spec, line, [], timeout)
    run = RemoteRun(target_spec, run_dir, log, line, name, session_s=time.monotonic() - began)
    if err or out.timed_out or out.returncode not in (0, None):
        run.start_error = err or (out.stderr.strip()[-300:] or f"the starting session exited {out.returncode}")
    return run


def observe(run: RemoteRun, *, watch_s: float = 1.0, timeout: float = 20.0) -> Observation:
    """Is it alive, did it exit (with what status), does its log grow? One session on the target."""
    out, err = _call(run.target, LOOK, [run.run_dir, run.log, str(watch_s)], timeout + watch_s)
    if err or "alive=" not in out.stdout:
        return Observation(None, False, None, (-1, -1), error=err or out.stderr.strip()[-300:] or "no answer")
    kv = dict(ln.split("=", 1) for ln in out.stdout.splitlines() if "=" in ln)
    size = lambda k: _num(kv.get(k)) if _num(kv.get(k)) is not None else -1  # noqa: E731
    return Observation(pid=_num(kv.get("pid")), alive=kv.get("alive") == "1", exit_code=_num(kv.get("rc")),
                       log_bytes=(size("before"), size("after")), facts=kv)


def _num(v: Optional[str]) -> Optional[int]:
    """An integer the shell printed, or None."""
    return int(v) if v and v.lstrip("-").isdigit() else None


def stop(run: RemoteRun, timeout: float = 15.0) -> None:
    """Kill the job's wrapper and its process group... only if its pid still names our run folder."""
    script = """r=$1; pid=$(cat "$r/pid" 2>/dev/null) || exit 0
tr '\\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$r" || exit 0
kill -TERM -- "-$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null; pkill -TERM -P "$pid" 2>/dev/null; exit 0"""
    _call(run.target, script, [run.run_dir], timeout)
