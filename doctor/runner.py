"""Run checks concurrently, each in a forked worker that can be killed whole at its timeout.

Threads cannot be killed, so a check that hangs in Python would hang dfdoctor. Each check therefore runs in
its own forked process (its own process group, and a child subreaper so that even daemonised grandchildren
stay findable). Results stream back one JSON line per finding, so a check killed at its deadline still keeps
what it had found; what it printed is captured with a cap. The parent is a single-threaded select loop.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional

from dfdoctor import causes, leftovers
from dfdoctor.capture import DEFAULT_LIMIT, CappedBuffer
from dfdoctor.errors import CheckCannotRun
from dfdoctor.agent.ending import become_subreaper, load_prctl
from dfdoctor.agent.procfs import proc_state
from dfdoctor.model import CheckRecord, Result, Status
from dfdoctor.registry import Check
from dfdoctor.terminate import forking, raise_held_sigterm, sigterm_interrupts

# A worker may overrun its check's timeout by this much to report a probe that timed out inside it.
WRAP_UP_S = 1.5
MIN_TIMEOUT_S = 0.1
LEAVING_TICK_S = 0.005  # how often a worker that closed its pipes is looked for among the exited
DEFAULT_TIMEOUT_S = 60.0  # for a plugin check that declared no usable timeout of its own


@dataclass
class _Worker:
    check: Check
    pid: int
    result_fd: int
    output_fd: int
    started: float
    deadline: float
    limit_s: float
    phase: str
    lines: bytearray = field(default_factory=bytearray)
    output: CappedBuffer = field(default_factory=CappedBuffer)
    result_open: bool = True
    output_open: bool = True
    exit_status: Optional[int] = None
    timed_out: bool = False


def effective_timeout(check: Check, ctx) -> float:
    """Per-check config wins, then `--timeout`, then the check's own default; never less than MIN_TIMEOUT_S
    (the CLI and the config refuse a limit of 0 or less; a check's own default is only trusted so far)."""
    for value in (ctx.option(check.id, "timeout"), ctx.timeout, check.timeout):
        try:
            limit = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(limit):
            return max(MIN_TIMEOUT_S, limit)
    return DEFAULT_TIMEOUT_S


def run_checks(checks: list[Check], ctx, phase: str, *, jobs: Optional[int] = None,
               progress: Optional[Callable[[str, Optional[Check], Optional[CheckRecord]], None]] = None,
               output_limit: int = DEFAULT_LIMIT) -> list[CheckRecord]:
    """Run `checks` for `phase`; return one record per check, in the order given."""
    loop = _Loop(checks, ctx, phase, jobs, progress, output_limit)
    with sigterm_interrupts():  # SIGTERM ends the run as Ctrl-C does: the workers are ended and cleaned up after
        try:
            loop.run()
        finally:
            loop.end()
    return loop.records()


def run_gated(checks: list[Check], ctx, phase: str, *,
              progress: Optional[Callable[[str, Optional[Check], Optional[CheckRecord]], None]] = None,
              output_limit: int = DEFAULT_LIMIT) -> tuple[list[CheckRecord], "Beside"]:
    """Start the checks that gate (`Check.gates`) at once; return when they have finished: their records, in the
    order given, and the others (`Beside`), started by its `begin` (the caller's start goes first: on a --target
    their sessions took CPU from it, issue 45) and then watched on by a thread. Every worker is forked in the
    caller's thread, before any thread of the runner's runs."""
    gating = {c.id for c in checks if c.gates}
    loop = _Loop(checks, ctx, phase, None, progress, output_limit)
    loop.pending = [c for c in checks if c.id in gating]
    with sigterm_interrupts():
        try:
            loop.start_all()  # forked here, in this thread
            loop.run(until=lambda: gating <= loop.done.keys())
        except BaseException:
            loop.end()
            raise
    loop.progress = None  # the progress line is the gate's: its caller closes it now
    return [loop.done[c.id] for c in checks if c.id in gating], Beside(loop, [c for c in checks if c.id not in gating])


class Beside:
    """The checks that cannot stop a launch, run beside its start: `begin` forks their workers (in the caller's
    thread) and a thread then only reads their pipes and reaps them (it forks nothing); `records` waits for them,
    `stop` ends them (the launch was interrupted)."""

    def __init__(self, loop: "_Loop", later: list[Check]) -> None:
        self.loop, self.later = loop, later
        self.thread = threading.Thread(target=self._run, name="dfdoctor-checks-beside", daemon=True)

    def begin(self) -> None:
        """Fork the checks that wait (at once once only), and watch them in the thread."""
        if self.thread.is_alive() or self.thread.ident is not None:
            return
        self.loop.pending += self.later
        with sigterm_interrupts():
            try:
                self.loop.start_all()
            except BaseException:
                self.loop.end()
                raise
        self.thread.start()

    def _run(self) -> None:
        try:
            self.loop.run()
        finally:
            self.loop.end()

    def records(self) -> list[CheckRecord]:
        """Every check's record (the gate's too), in the order given, once the last one has finished (begun here
        when they were not)."""
        self.begin()
        self.thread.join()
        return self.loop.records()

    def stop(self) -> None:
        """End the checks still running (their workers killed, as an interrupted run's) and wait for that."""
        self.loop.stopped = True
        if self.thread.ident is None:  # never begun: nothing of theirs runs, the gate's workers are reaped
            self.loop.end()
            return
        self.thread.join()


class _Loop:
    """The runner's one select loop over its workers, which `run` drives until a condition holds (or all ended)
    and `end` leaves nothing of (a worker still running is killed, with what it started)."""

    def __init__(self, checks: list[Check], ctx, phase: str, jobs: Optional[int], progress, output_limit: int):
        self.checks, self.ctx, self.phase, self.progress, self.output_limit = checks, ctx, phase, progress, output_limit
        self.pending = list(checks)
        self.running: dict[int, _Worker] = {}
        self.done: dict[str, CheckRecord] = {}
        self.sel = selectors.DefaultSelector()
        self.jobs = jobs or max(1, len(self.pending))
        self.stopped = False  # set from another thread: `run` returns at its next tick

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        while (self.pending or self.running) and not until() and not self.stopped:
            self.start_all()
            now = time.monotonic()
            # a worker whose pipes both closed is leaving (os._exit closes them): it is reaped a tick later,
            # not at the next tenth of a second (every run waited up to 0.1 s on its last check, issue 45)
            leaving = any(not (w.result_open or w.output_open) for w in self.running.values())
            wait = min([w.deadline - now for w in self.running.values()] + [LEAVING_TICK_S if leaving else 0.1])
            for key, _ in self.sel.select(timeout=max(0.0, wait)):
                w, kind = key.data
                _drain(self.sel, w, kind)
            if self.progress:
                self.progress("tick", None, None)
            for w in list(self.running.values()):
                finished = _poll(self.sel, w)
                if finished is None:
                    continue
                del self.running[w.pid]
                self.done[w.check.id] = finished
                if self.progress:
                    self.progress("done", w.check, finished)

    def start_all(self) -> None:
        """Start workers for pending checks, as many as `jobs` allows at once."""
        while self.pending and len(self.running) < self.jobs:
            chk = self.pending.pop(0)
            skipped = _not_applicable(chk, self.ctx, self.phase)
            if skipped is not None:
                self.done[chk.id] = skipped
                if self.progress:
                    self.progress("done", chk, skipped)
                continue
            w = _start(chk, self.ctx, self.phase, self.output_limit)
            self.running[w.pid] = w
            raise_held_sigterm()
            self.sel.register(w.result_fd, selectors.EVENT_READ, (w, "result"))
            self.sel.register(w.output_fd, selectors.EVENT_READ, (w, "output"))
            if self.progress:
                self.progress("start", chk, None)

    def end(self) -> None:
        """Nothing we started may outlive us (interrupted: Ctrl-C, SIGTERM, a stop): each worker left is ended."""
        for w in self.running.values():
            _kill_tree(w.pid)
            try:
                os.waitpid(w.pid, 0)
            except ChildProcessError:
                pass
            leftovers.clean(w.pid)  # what it made elsewhere (a rehearsal's sentinel, over its hops)
        self.running.clear()
        self.sel.close()

    def records(self) -> list[CheckRecord]:
        return [self.done[c.id] for c in self.checks if c.id in self.done]


def _not_applicable(chk: Check, ctx, phase: str) -> Optional[CheckRecord]:
    """The skip record of a check that says from the context alone that it does not apply; None to run it (a
    `not_applicable` that raises is run in its worker, where the same call becomes the check's `error`)."""
    try:
        skipped = chk.skip_for(ctx)
    except Exception:
        return None
    return CheckRecord.from_results(chk.id, phase, chk.title, [skipped], 0.0, output="") if skipped else None


def _start(chk: Check, ctx, phase: str, output_limit: int) -> _Worker:
    limit = effective_timeout(chk, ctx)
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    load_prctl()  # once here, not in every worker (see load_prctl)
    with forking():
        pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's code
        status = 70
        try:
            os.close(res_r)
            os.close(out_r)
            os.setpgid(0, 0)
            become_subreaper()  # not Linux: process groups still cover the common case
            # SIGPIPE stays ignored (as Python sets it): a write to a child that went away is a BrokenPipeError
            # the check can handle, not the worker's silent death.
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            os.close(out_w)
            ctx.phase = phase
            ctx.timeout = limit
            _work(chk, ctx, res_w)
            status = 0
        finally:
            flush_quietly()
            if _has_children():
                _kill_descendants(os.getpid())
            os._exit(status)
    os.close(res_w)
    os.close(out_w)
    os.set_blocking(res_r, False)
    os.set_blocking(out_r, False)
    now = time.monotonic()
    return _Worker(chk, pid, res_r, out_r, now, now + limit + WRAP_UP_S, limit, phase, output=CappedBuffer(output_limit))


def flush_quietly() -> None:
    """Flush what a forked child printed before it leaves by os._exit (which flushes nothing); a closed or broken
    stream must not keep it from leaving."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass


def _work(chk: Check, ctx, res_w: int) -> None:
    """Run the check in the worker, streaming each result as one JSON line."""
    def emit(d: dict) -> None:
        data = (json.dumps(d, default=str) + "\n").encode()
        while data:
            data = data[os.write(res_w, data):]

    try:
        out = chk.skip_for(ctx) or chk.func(ctx)  # streamed as yielded: a timeout keeps what came before it
        if isinstance(out, Result):
            out = [out]
        for r in out or ():
            if not isinstance(r, Result):
                raise TypeError(f"check {chk.id} yielded {type(r).__name__}, not a dfdoctor.model.Result")
            emit({"result": r.to_dict()})
    except CheckCannotRun as exc:
        emit({"result": Result(Status.ERROR, exc.summary, details=exc.details, fix=exc.fix).to_dict()})
    except BaseException:
        emit({"exception": traceback.format_exc()})


def _drain(sel: selectors.BaseSelector, w: _Worker, kind: str, rest: bool = False) -> None:
    """Move what a worker's pipe holds into its buffers; close the pipe at EOF or, with `rest`, once empty."""
    fd = w.result_fd if kind == "result" else w.output_fd
    if not (w.result_open if kind == "result" else w.output_open):
        return
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            if not rest:
                return
            chunk = b""
        if not chunk:
            break
        (w.lines.extend if kind == "result" else w.output.write)(chunk)
        if not rest:
            return
    sel.unregister(fd)
    os.close(fd)
    if kind == "result":
        w.result_open = False
    else:
        w.output_open = False


def _poll(sel: selectors.BaseSelector, w: _Worker) -> Optional[CheckRecord]:
    """Return the worker's record once it has finished or been killed at its deadline, else None."""
    if w.exit_status is None:
        pid, status = os.waitpid(w.pid, os.WNOHANG)
        if pid:
            w.exit_status = status
    now = time.monotonic()
    if w.exit_status is None and now >= w.deadline:
        w.timed_out = True
        _kill_tree(w.pid)
        _, w.exit_status = os.waitpid(w.pid, 0)
        leftovers.clean(w.pid)
    if w.exit_status is None:
        return None
    # The worker is gone: take what is left in the pipes, then stop listening (a grandchild that escaped
    # the kill may hold the output pipe open forever; we do not wait for it).
    for kind in ("result", "output"):
        _drain(sel, w, kind, rest=True)
    _kill_tree(w.pid, include_leader=False)
    return _record(w, time.monotonic() - w.started)


def _record(w: _Worker, duration: float) -> CheckRecord:
    results: list[Result] = []
    for line in bytes(w.lines).splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "result" in msg:
            results.append(Result.from_dict(msg["result"]))
        elif "exception" in msg:
            tb = msg["exception"]
            last = tb.strip().splitlines()[-1] if tb.strip() else "exception"
            results.append(Result(Status.ERROR, f"check {w.check.id} raised {last}", details=tb,
                                  fix="This is a bug in the check, not in your launch; report it to the check's author."))
    if w.timed_out:
        results.append(Result(Status.TIMEOUT,
                              f"check {w.check.id} did not finish within its {w.limit_s:g} s timeout "
                              f"(ran {duration:.1f} s); its process group was killed",
                              fix=f"Raise its limit with --timeout or [tool.dfdoctor.checks.\"{w.check.id}\"] timeout, "
                                  "or skip it with --skip."))
    elif os.WIFSIGNALED(w.exit_status):
        name = _signal_name(os.WTERMSIG(w.exit_status))
        results.append(Result(Status.ERROR, f"check {w.check.id} died from {name}",
                              fix="This is a bug in the check (or a library it calls); report it to the check's author."))
    elif os.WEXITSTATUS(w.exit_status) != 0 and not results:
        results.append(Result(Status.ERROR, f"check {w.check.id} exited with status {os.WEXITSTATUS(w.exit_status)}"))
    if not results:
        results.append(Result(Status.OK, "no problem found"))
    if w.check.source == "built-in":
        results = [_catalogued(w.check, r) for r in results]
    return CheckRecord.from_results(w.check.id, w.phase, w.check.title, results, duration, output=w.output.text())


def _catalogued(chk: Check, r: Result) -> Result:
    """A built-in check gives only cause ids from the catalogue (dfdoctor.causes): another one is a bug in the
    check, said as its `error`, never passed on as a cause nobody documents. Plugins may add their own."""
    if r.cause is None or r.cause in causes.ALL:
        return r
    return Result(Status.ERROR, f"check {chk.id} gave the cause id {r.cause!r}, which dfdoctor.causes does not "
                  f"list; its finding was: {r.status.value}: {r.summary}", details=r.details, evidence=r.evidence,
                  fix="This is a bug in dfdoctor: add the cause id to dfdoctor/causes.py (and the README's cause "
                      "list) or use one that is there.")


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _has_children() -> bool:
    """Whether this process has a child, alive or not yet reaped (it is a subreaper: every orphan of its tree is
    one). Without one, the walk over every process on the machine is skipped (most checks start none)."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return False
    return True


def _kill_descendants(pid: int) -> None:
    if sys.platform == "linux" and proc_state(pid) is None:
        # Reaped (every finished worker's look): psutil would find no such process either. Its import is left to
        # the few looks at one that lives (it was 0.04 G of a `check`'s 0.68 G instructions).
        return
    import psutil

    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return
    for k in kids:
        try:
            k.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(kids, timeout=2)


def _kill_tree(pid: int, include_leader: bool = True) -> None:
    """Kill a worker, everything under it (it is a subreaper, so daemons too) and its process group."""
    if include_leader:
        try:
            os.kill(pid, signal.SIGSTOP)  # freeze it so it cannot fork more while its tree is killed
        except ProcessLookupError:
            pass
    _kill_descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if include_leader:
        # A worker killed before its own setpgid() has no group yet, and a stopped one would make the caller's
        # waitpid() wait forever: the worker itself always gets the SIGKILL.
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
