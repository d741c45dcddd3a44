"""The sessions on a target behind `launch --target` and `status` (`local.py` does the same here).

`ship_recorder` sends dfdoctor's agent over stdin into a run folder on the target (`dfdoctor.agent.ship`: ship.sh
keeps it there as agent.pyz) and starts its recorder detached there, with the strategy `persistence.session` found
best for the target or the recorder's own detach; `fetch` reads the run folder back in one session (the agent's
`target-agent` part answers there, the agent sent on stdin).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Optional

from dfdoctor.agent import ship
from dfdoctor.agent.ship import END_MARK, PID_MARK, PY_MARK, RUN_DIR_MARK
from dfdoctor.command import ProbeOutcome, run_command
from dfdoctor.targets import Target, transport
from dfdoctor.targets.strategies import BY_NAME, DEFAULT, best_for, for_launch


def _num(v: Optional[str]) -> Optional[int]:
    """An integer the shell printed, or None."""
    return int(v) if v and re.fullmatch(r"-?[0-9]+", v) else None


# ---- the flight recorder on a target (`dfdoctor launch --target`) ---------------------------------------
DEFAULT_STRATEGY = DEFAULT  # the recorder's own --detach: SIGHUP ignored before fork, setsid, fds to files


@dataclass
class Shipped:
    """A recorder started on a target: its run folder there, its pid (when it said), how it was detached."""

    target: Target
    run_dir: Optional[str]
    python: str
    strategy: str
    line: str
    pid: Optional[int] = None
    error: Optional[str] = None
    session_s: float = 0.0
    fallback_from: Optional[str] = None  # why the training interpreter could not run the recorder
    unreachable: bool = False  # the error is the connection's own (ssh exit 255, lxc-attach could not attach)


def ship_recorder(target: Target, *, spec: dict, run_id: str, cwd: str, python: str = "python3",
                  strategy: Optional[str] = None, run_dir: Optional[str] = None, keep: int = 20,
                  timeout: float = 30.0) -> Shipped:
    """Send the agent over stdin into a run folder on the target and start it detached there, with the
    strategy asked for (`auto`: the one `persistence.session` remembered, else the recorder's own detach)."""
    name = for_launch(str(target), strategy)
    began = time.monotonic()
    shipped = Shipped(target, run_dir, python, name, "")
    line = ""
    if name != DEFAULT_STRATEGY:
        # the strategy's line names the run folder and the interpreter: learn both there first
        _ship_session(target, [python, cwd, run_id, run_dir or "", "", "", "1", str(keep)], None, timeout, shipped)
        if shipped.error:
            return shipped
        line = BY_NAME[name].line([shipped.python, f"{shipped.run_dir}/{ship.ZIP_NAME}", "recorder",
                                   shipped.run_dir or ""],
                                  f"{shipped.run_dir}/recorder.out", name=run_id.replace("-", ""),
                                  python=shipped.python)
        shipped.line = line
    args = [cwd, run_id, shipped.run_dir or "", json.dumps(spec), line, "0", str(keep)]
    _ship_session(target, [shipped.python, *args], ship.bundle("recorder"), timeout, shipped)
    if name == DEFAULT_STRATEGY and shipped.pid is None and shipped.run_dir and shipped.python != "python3" and \
            not shipped.unreachable:
        # the training interpreter cannot run even the standard-library recorder (too old, broken): the
        # target's python3 can. ship.sh refuses a folder that holds a record already, so never two recorders.
        failed = shipped.error
        shipped.error, shipped.python = None, "python3"
        _ship_session(target, ["python3", cwd, run_id, shipped.run_dir, *args[3:]], ship.bundle("recorder"),
                      timeout, shipped)
        shipped.fallback_from = failed or "no pid"
    if not shipped.error and name == DEFAULT_STRATEGY and shipped.pid is None:
        shipped.error = "the recorder did not say its pid: it did not detach"
    shipped.session_s = time.monotonic() - began
    return shipped


def _ship_session(target: Target, args: list[str], stdin: Optional[bytes], timeout: float,
                  shipped: Shipped) -> None:
    """One run of ship.sh on the target; what it printed (folder, python, pid) or its error goes into `shipped`."""

    out = run_command(transport.wrap(target, ["sh", "-c", ship.ship_script(), "sh", *args]), timeout=timeout,
                      stdin_data=stdin, stack_signal=None)
    for mark, value in re.findall(f"({re.escape(RUN_DIR_MARK)}|{re.escape(PY_MARK)})(.*?){re.escape(END_MARK)}",
                                  out.stdout, re.S):
        if mark == RUN_DIR_MARK:
            shipped.run_dir = value
        else:
            shipped.python = value
    for ln in out.stdout.splitlines():
        if ln.startswith(PID_MARK):
            shipped.pid = _num(ln[len(PID_MARK):].strip())
    err = transport.transport_error(target, out.returncode, out.stderr)
    shipped.unreachable = bool(err or out.spawn_error)
    if err or out.timed_out or out.spawn_error or out.returncode not in (0, None) or not shipped.run_dir:
        shipped.error = err or out.spawn_error or (f"the starting session did not return within {timeout:.0f} s"
                                                   if out.timed_out else None) or \
            out.stderr.strip()[-400:] or f"the starting session exited {out.returncode} without starting the recorder"


def fetch(target: Target, run_dir: str, *, python: str = "python3", live: bool = False, full: bool = False,
          timeout: float = 20.0, ranks: bool = False) -> dict:
    """One session on the target: the run folder's files and whether its recorder and job still live.

    The answer is a dict (`files`, `recorder_alive`, `job_alive`, `boot_id`, with `live` facts of the job
    when asked and it runs); on failure `{"error": "..."}` in ssh's or the shell's own words.
    """

    argv = transport.wrap(target, ship.stdin_argv(python, "target-agent", run_dir, "1" if live else "0",
                                                  "1" if full else "0", *(["1"] if ranks else [])))
    out = run_command(argv, timeout=timeout + (25 if live else 0), stdin_data=ship.stdin_line("target-agent"),
                      stack_signal=None)  # py-spy: 5 s a process
    return _answer(target, out, timeout)


def stop(target: Target, run_dir: str, *, python: str = "python3", grace_s: float) -> dict:
    """One session on the target that ends the run's job there (the agent's `stop` part, dfdoctor.agent.stop):
    its answer, or `{"error": "..."}` as `fetch` gives it."""
    argv = transport.wrap(target, ship.stdin_argv(python, "stop", run_dir, f"{grace_s:g}"))
    timeout = grace_s + 30.0  # the grace, then SIGKILL's and the recorder's few seconds, then the session's own
    out = run_command(argv, timeout=timeout, stdin_data=ship.stdin_line("stop"), stack_signal=None)
    return _answer(target, out, timeout)


def _answer(target: Target, out: ProbeOutcome, timeout: float) -> dict:
    """The JSON an agent part printed after its mark, or `{"error": ...}` in ssh's or the shell's own words."""
    err = transport.transport_error(target, out.returncode, out.stderr)
    _, mark, answer = out.stdout.rpartition("@@dfdoctor-answer@@")
    if err or not mark:
        return {"error": err or out.spawn_error or out.stderr.strip()[-400:] or
                (f"no answer within {timeout:.0f} s" if out.timed_out else f"no answer (status {out.returncode})")}
    try:
        return json.loads(answer)
    except ValueError:
        return {"error": "a malformed answer: " + answer[:200]}
