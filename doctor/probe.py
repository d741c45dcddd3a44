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
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import dfdoctor.checks.probes as _probes_pkg
from dfdoctor import causes, probe_server
from dfdoctor.agent import ship
from dfdoctor.command import ProbeOutcome, run_command
from dfdoctor.errors import CheckCannotRun
from dfdoctor.model import Result, error
from dfdoctor.targets import Target, relay, remote_probe, transport
from dfdoctor.lazy_re import compile_later

PROBES_DIR = Path(_probes_pkg.__file__).resolve().parent


def unreached(ctx, out: ProbeOutcome) -> Optional[Result]:
    """The finding for a probe that never got to the target (the transport failed), else None.

    An `error` (the check could not look), with the transport's own words and the cause, so a run of this
    check alone still says what is wrong; `target.reachable` gives the same words as a `fail` with its fix.
    """
    err = out.extra.get("transport_error")
    return cannot_reach(ctx.target, err) if err else None


def cannot_reach(target: Target, words: str) -> Result:
    """A check's `error` when it could not get to the target: the transport's words, the cause, the fix."""
    return error(f"not examined: cannot reach {target.describe()}: {words}", cause=causes.TARGET_UNREACHABLE,
                 fix=reach_fix(target))


def reach_fix(target: Target) -> str:
    """What to repair, in the terms of the tool that could not get through (the target kind's words)."""
    return target.kind_class.reach_fix(target)


def run_probe(ctx, script: str | os.PathLike, args: Sequence[str] = (), *, timeout: Optional[float] = None,
              env: Optional[dict[str, str]] = None, cwd: Optional[os.PathLike] = None,
              files: Optional[dict[str, Path]] = None, request: Any = None, site: bool = True,
              preload: Sequence[str] = ()) -> ProbeOutcome:
    """Run a probe script with the training interpreter (`ctx.python`) in the job's cwd and environment.

    `script` is a path, or a bare file name under `checks/probes/`. `files` ({name: path}) travel beside the
    probe to a --target (locally the probe is told their paths). `request`, any JSON value, reaches the probe
    in a file (`_probe_support.request()`), whatever its size: argv words are for short flags only. The
    probe's JSON answer, if it wrote one, is in `outcome.payload`. Without `site` a probe that needs the
    standard library alone starts with -S, here and on a --target: site-packages' .pth files are not its business,
    and a fresh interpreter that skips them starts in a fifth of the time. `preload`: modules that a probe server here
    imports once before the probe's fork, for the forks after it too (`probe_server.run`); a fresh probe
    imports them itself.
    """
    path = Path(script)
    if not path.is_absolute() and not path.exists():
        path = PROBES_DIR / path
    target = ctx.target
    if target.runs_here:
        outcome = _run_probe_here(ctx, path, args, timeout=timeout, env=env, cwd=cwd, request=request, site=site,
                                  preload=preload)
    else:
        outcome = _run_probe_on(target, ctx, path, args, timeout=timeout or ctx.timeout or 60.0, env=env, cwd=cwd,
                                files=files, request=request, site=site)
    not_understood = _probe_not_understood(outcome, path, files)
    if not_understood:
        raise CheckCannotRun(f"dfdoctor's probe cannot run in the training interpreter {ctx.python or 'python3'}: "
                             f"its Python does not understand the probe ({not_understood})",
                             "dfdoctor's probes need Python 3.6 or newer in the training interpreter; pass --python "
                             "with one, or run the job with a newer Python.", details=outcome.stderr[-4000:])
    return outcome


_TRACEBACK_FILE = compile_later(r'^\s*File "([^"]+)", line (\d+)', re.M)


def _probe_not_understood(outcome: ProbeOutcome, path: Path, files: Optional[dict[str, Path]]) -> Optional[str]:
    """The syntax error an interpreter too old for the probe raised while compiling one of its files, or None.
    A user's syntax error is the probe's to report (in its answer), so only the probe's own files count."""
    if outcome.payload is not None or outcome.timed_out or outcome.returncode in (0, None):
        return None
    lines = [l.strip() for l in outcome.stderr.splitlines() if l.strip()]
    too_old = next((l for l in lines if l.startswith(ship.TOO_OLD)), None)
    if too_old:  # on a target the agent's loader looks before any probe is compiled
        return "Python " + too_old[len(ship.TOO_OLD):]
    where = _TRACEBACK_FILE.findall(outcome.stderr)
    if not lines or not lines[-1].startswith(("SyntaxError", "IndentationError", "TabError")) or not where:
        return None
    file, line = where[-1]
    ours = {*remote_probe.probe_files(path), *(files or {})}  # the probe and the siblings it ships with
    return f"{lines[-1]} in {os.path.basename(file)}, line {line}" if os.path.basename(file) in ours else None


def _run_probe_here(ctx, path: Path, args: Sequence[str], *, timeout: Optional[float], env: Optional[dict[str, str]],
                    cwd: Optional[os.PathLike], request: Any, site: bool = True,
                    preload: Sequence[str] = ()) -> ProbeOutcome:
    """Run the probe on this machine, its answer and its input in private temp files."""
    run_env = dict(ctx.env if env is None else env)
    fd, out_path = tempfile.mkstemp(prefix="dfdoctor-probe-", suffix=".json")
    os.close(fd)
    run_env["DFDOCTOR_PROBE_OUT"] = out_path
    in_path = None
    if request is not None:
        fd, in_path = tempfile.mkstemp(prefix="dfdoctor-probe-in-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(request, f)
        run_env["DFDOCTOR_PROBE_IN"] = in_path
    run_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    limit = timeout or ctx.timeout or 60.0
    started = time.monotonic()
    try:
        outcome = None
        if probe_server.serves(ctx.python, run_env, str(path)):
            outcome = probe_server.run([str(path), *args], timeout=limit, cwd=cwd or ctx.cwd, env=run_env,
                                       preload=preload)
        if outcome is None:  # no server, or it did not take the probe in time: a fresh interpreter, in what is left
            left = max(1.0, limit - (time.monotonic() - started))
            outcome = run_command([ctx.python, *(() if site else ("-S",)), str(path), *args], timeout=left,
                                  cwd=cwd or ctx.cwd, env=run_env)
        try:
            text = Path(out_path).read_text()
            outcome.payload = json.loads(text) if text.strip() else None
        except (OSError, ValueError):
            outcome.payload = None
        return outcome
    finally:
        for p in (out_path, in_path):
            try:
                if p:
                    os.unlink(p)
            except OSError:
                pass


def _run_probe_on(target: Target, ctx, path: Path, args: Sequence[str], *, timeout: float,
                  env: Optional[dict[str, str]], cwd: Optional[os.PathLike],
                  files: Optional[dict[str, Path]] = None, request: Any = None, site: bool = True) -> ProbeOutcome:
    """Ship the probe to the target's python over stdin and run it there (see `dfdoctor.targets.remote_probe`).

    Only the variables a check set on purpose travel (those that differ from dfdoctor's own environment):
    the target has an environment of its own.
    """
    wanted = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
    wanted.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    python = ctx.python or "python3"
    asked = dict(timeout=timeout, env=wanted, cwd=str(cwd or ctx.cwd or ""), python=None,
                 extra={n: p.read_text() for n, p in (files or {}).items()}, probe_input=request, site=site)
    # The bootstrap keeps the deadline on the target; the local one only adds room for connecting.
    wait_s = timeout + transport.CONNECT_TIMEOUT_S + remote_probe.STACK_GRACE_S + 2
    outcome = _carried(target, python, remote_probe.line(path, args, **asked), timeout, wait_s)
    if outcome is None:  # no relay to carry it: a session of its own
        outcome = target.kind_class.ship(target, remote_probe.argv(python), remote_probe.request(path, args, **asked),
                                         hold_stdin=True, timeout=wait_s)
    stdout, trailer = remote_probe.split_answer(outcome.stdout)
    outcome.stdout = stdout
    outcome.extra["target"] = str(target)
    err = outcome.extra.get("transport_error")
    if err:
        outcome.spawn_error = f"cannot reach {target.describe()}: {err}"
        return outcome
    if trailer is None:
        if outcome.returncode in (126, 127) or "not found" in outcome.stderr or "No such file" in outcome.stderr:
            said = _LXC_SOURCE.sub("", outcome.stderr.strip()[-300:])
            outcome.spawn_error = f"no interpreter {python!r} on {target.describe()}: {said}"
        return outcome
    outcome.returncode = trailer.get("rc")
    outcome.timed_out = outcome.timed_out or bool(trailer.get("timed_out"))
    try:
        outcome.payload = json.loads(trailer["answer"]) if trailer.get("answer") else None
    except ValueError:
        outcome.payload = None
    return outcome


def _carried(target: Target, python: str, line: bytes, timeout: float, wait_s: float) -> Optional[ProbeOutcome]:
    """The probe run by this run's relay on the target (targets/relay.py), as its own session would have told
    it; None when no relay carries it."""
    began = time.monotonic()
    said = relay.carry(target, python, line, timeout, wait_s)
    if said is None:
        return None
    argv = transport.wrap(target, remote_probe.argv(python))
    if said.get("timed_out"):  # as a session of its own killed at the same deadline
        return ProbeOutcome(argv, -9, "", "", time.monotonic() - began, timed_out=True)
    return ProbeOutcome(argv, said["rc"], relay.text(said["out"]), relay.text(said["err"]), time.monotonic() - began)


# lxc-attach's own source position before its words (`../src/lxc/attach.c: lxc_attach_run_command: 1841 `): no
# help to a reader of a headline
_LXC_SOURCE = compile_later(r"(?:\S+/)?\w+\.c: \w+: \d+ ")


def run_on_target(ctx, argv: Sequence[str], *, timeout: float, tty: bool = False,
                  stdin_data: Optional[bytes] = None) -> ProbeOutcome:
    """Run argv where the job runs (`ctx.target`), every word intact; ssh's own words on a failed connection."""
    target = ctx.target
    outcome = run_command(transport.wrap(target, argv, tty=tty), timeout=timeout, stdin_data=stdin_data,
                          stack_signal=target.kind_class.stack_signal())
    err = transport.transport_error(target, outcome.returncode, outcome.stderr)
    if err:
        outcome.extra["transport_error"] = err
    return outcome
