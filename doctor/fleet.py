"""`check` on many targets side by side: one forked pipeline per target, at most N at once, one row each.

Each target gets the same checks and options as a `check --target T` would, in its own forked process (its
own process group, a subreaper), so a target that cannot be reached, a crash or a hang stays that target's
row: the parent only waits, with a deadline, and kills what overruns it together with everything it started.
Forking (not a fresh `dfdoctor` per target) spares each target the interpreter's start and imports.

Checks are bounded across targets too: every target runs at most `lanes` checks at once, so that all of them
together run about CHECKS_PER_CORE per core. Without that bound 16 targets start 16 x N checks at once on a
small controller; the slowest then overrun their own limits and report timeouts that say nothing about the
target (seen: log.writable's 10 s limit, 16 ssh targets on 2 cores). With fewer lanes than checks,
target.reachable runs first and alone; where it cannot reach the target the other checks run all at once
(each fails on its first connection), so an unreachable target costs one connection timeout, not one per
check, and its records read as a single run's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psutil
from dfdoctor import causes
from dfdoctor.config import Config
from dfdoctor.context import Context
from dfdoctor.engine import (
    build_context,
    choose_checks,
    environment_facts,
    fail_on,
    guard_many,
    now_iso,
    one_unreachable_target,
    run_phase,
    target_connection,
    verdict_from_checks,
)
from dfdoctor.fleet_specs import DEFAULT_PARALLEL
from dfdoctor.agent.ending import become_subreaper, load_prctl
from dfdoctor.model import CheckRecord, Report, Status, TargetRow, Verdict
from dfdoctor.progress import StatusLine, seconds
from dfdoctor.registry import Check
from dfdoctor.rows import verdict_over_rows
from dfdoctor.runner import WRAP_UP_S, effective_timeout, flush_quietly
from dfdoctor.safefile import write_atomically
from dfdoctor.targets.target import shown_spec
from dfdoctor.terminate import forking, raise_held_sigterm, sigterm_interrupts

# Checks mostly wait (on ssh, on the target's interpreters): a few per core keep a controller busy, not swamped.
CHECKS_PER_CORE = 4
REACHABLE = "target.reachable"
# Beyond the slowest check's own limit, what a target may take to connect, start and wrap up.
SLACK_S = 30.0


@dataclass
class _Child:
    spec: str
    index: int
    pid: int
    started: float
    deadline: float
    killed: bool = False


def lanes_per_target(targets: int, parallel: int, cores: Optional[int] = None) -> int:
    """How many checks one target may run at once, so that every running target together stays within
    CHECKS_PER_CORE per core (at least one each)."""
    at_once = max(1, min(targets, parallel))
    return max(1, (CHECKS_PER_CORE * (cores or os.cpu_count() or 1)) // at_once)


def deadline_for(checks: list[Check], ctx: Context, lanes: Optional[int] = None) -> float:
    """How long one target may take: with a lane per check, its slowest check's limit; with fewer lanes, the
    bound of a greedy schedule (every limit shared among the lanes, plus the longest); plus slack."""
    limits = [effective_timeout(c, ctx) for c in checks] or [0.0]
    if lanes is None or lanes >= len(limits):
        work = max(limits)
    else:
        work = sum(limits) / lanes + max(limits)
    return work + WRAP_UP_S + SLACK_S


def run_targets(contexts: list[Context], checks: list[Check], broken: list[CheckRecord], cfg: Config,
                fail_on_level: str, parallel: int = DEFAULT_PARALLEL) -> tuple[list[TargetRow], list[CheckRecord]]:
    """Run the pre-launch checks on every context's target, at most `parallel` at once; rows in the given order.

    Every record comes back tagged with its row's target.
    """
    tmp = Path(tempfile.mkdtemp(prefix="dfdoctor-fleet-"))
    lanes = lanes_per_target(len(contexts), parallel)
    pending = list(enumerate(contexts))
    running: dict[int, _Child] = {}
    results: dict[int, tuple[TargetRow, list[CheckRecord]]] = {}
    line = StatusLine()  # the forked pipelines write to files: the parent alone shows how far they are
    counts = (0, 0)
    with sigterm_interrupts():  # SIGTERM (a CI job's timeout) ends every target's child, as Ctrl-C does
        try:
            while pending or running:
                while pending and len(running) < max(1, parallel):
                    i, ctx = pending.pop(0)
                    limit = deadline_for(checks, ctx, lanes)
                    pid = _fork_one(ctx, checks, broken, cfg, tmp / f"{i}.json", tmp / f"{i}.err", lanes)
                    now = time.monotonic()
                    running[pid] = _Child(str(ctx.target), i, pid, now, now + limit)
                    raise_held_sigterm()
                _show(line, len(contexts), len(results), running, force=(len(results), len(running)) != counts)
                counts = (len(results), len(running))  # a target started or ended: drawn at once
                time.sleep(0.02)
                for pid, child in list(running.items()):
                    status = _reaped(pid)
                    if status is None and time.monotonic() < child.deadline:
                        continue
                    if status is None:
                        _kill_tree(pid)
                        child.killed = True
                        status = _reaped(pid, block=True)
                    del running[pid]
                    results[child.index] = _row(child, status, tmp, fail_on_level, verdict_from_checks)
        finally:
            line.close()
            for pid in running:  # interrupted: nothing we started may outlive us
                _kill_tree(pid)
                _reaped(pid, block=True)
            for f in tmp.iterdir():
                f.unlink()
            tmp.rmdir()
    rows, records = [], []
    for i in sorted(results):
        row, recs = results[i]
        rows.append(row)
        records.extend(recs)
    return rows, records


def _show(line: StatusLine, total: int, done: int, running: dict[int, _Child], force: bool) -> None:
    """`checking 3 targets: 1 of 3 done; running: ssh://a 12 s, ...` on the terminal."""
    now = time.monotonic()
    names = ", ".join(f"{shown_spec(c.spec)} {seconds(now - c.started)}" for c in list(running.values())[:3])
    more = f" and {len(running) - 3} more" if len(running) > 3 else ""
    line.show(f"dfdoctor: checking {total} targets: {done} of {total} done" + (f"; running: {names}{more}" if names
                                                                                 else ""), force=force)


def _fork_one(ctx: Context, checks: list[Check], broken: list[CheckRecord], cfg: Config, out: Path,
              err: Path, lanes: int) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    load_prctl()  # once here, not in every child (agent/ending.py)
    with forking():
        pid = os.fork()
    if pid:
        return pid
    status = 70
    try:  # the child: never returns into the caller's code
        os.setpgid(0, 0)
        become_subreaper()  # ssh's control master and each check's worker stay ours to end
        signal.signal(signal.SIGTERM, _exit_on_term)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        started = time.monotonic()
        with target_connection(ctx):
            records = broken + _run_target(ctx, checks, cfg, lanes)
        doc = {"checks": [r.to_dict() for r in records], "duration_s": round(time.monotonic() - started, 3),
               "environment": environment_facts(ctx, records)}
        write_atomically(out, json.dumps(doc, default=str), private=True)
        status = 0
    except BaseException:
        try:
            traceback.print_exc()
        except Exception:
            pass
    finally:
        flush_quietly()
        os._exit(status)


def _run_target(ctx: Context, checks: list[Check], cfg: Config, lanes: int) -> list[CheckRecord]:
    """One target's checks in `lanes` lanes. With fewer lanes than checks, reachability goes first: where the
    target cannot be reached the rest run all at once (each fails on its first connection, and the report reads
    as a single run's), else in the lanes."""
    first = [c for c in checks if c.id == REACHABLE]
    if lanes >= len(checks) or not first:
        return run_phase(ctx, checks, "pre", cfg, jobs=lanes)
    reached = run_phase(ctx, first, "pre", cfg)
    rest = [c for c in checks if c.id != REACHABLE]
    unreachable = any(r.cause == causes.TARGET_UNREACHABLE for r in reached)
    records = reached + run_phase(ctx, rest, "pre", cfg, jobs=None if unreachable else lanes)
    return one_unreachable_target(_in_order(checks, records))


def _in_order(checks: list[Check], records: list[CheckRecord]) -> list[CheckRecord]:
    """Records in the order of their checks, as a single run gives them."""
    rank = {c.id: i for i, c in enumerate(checks)}
    return sorted(records, key=lambda r: rank.get(r.id, len(rank)))


def _exit_on_term(signum, frame) -> None:
    raise SystemExit(143)  # unwinds through the runner, which kills its workers, and closes the ssh master


def _reaped(pid: int, block: bool = False) -> Optional[int]:
    """The child's wait status once it has ended (None while it runs)."""
    try:
        got, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return -1
    return status if got else None


def _kill_tree(pid: int) -> None:
    """SIGTERM (so the child ends its own workers and ssh master), then SIGKILL whatever is left of it."""
    try:
        proc = psutil.Process(pid)
        family = [proc] + proc.children(recursive=True)
    except psutil.Error:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass
    gone, alive = psutil.wait_procs(family, timeout=3)
    for p in alive + [p for p in _descendants(family)]:
        try:
            p.kill()
        except psutil.Error:
            pass


def _descendants(procs: list[psutil.Process]) -> list[psutil.Process]:
    found = []
    for p in procs:
        try:
            found.extend(p.children(recursive=True))
        except psutil.Error:
            pass
    return found


def _row(child: _Child, status: int, tmp: Path, fail_on_level: str, verdict_from_checks) -> tuple[TargetRow,
                                                                                                     list[CheckRecord]]:
    took = round(time.monotonic() - child.started, 3)
    out, err = tmp / f"{child.index}.json", tmp / f"{child.index}.err"
    if out.is_file() and not child.killed:
        doc = json.loads(out.read_text(encoding="utf-8"))
        records = [CheckRecord.from_dict(d) for d in doc["checks"]]
        for r in records:
            r.target = child.spec
        env = {k: v for k, v in doc.get("environment", {}).items() if k not in ("host", "os", "dfdoctor_python")}
        return TargetRow(child.spec, verdict_from_checks(records, fail_on_level), env, doc["duration_s"]), records
    said = _tail(err)
    if child.killed:
        summary = f"the checks on {child.spec} did not finish within {child.deadline - child.started:.0f} s"
        rec = CheckRecord(id="target.checks", phase="pre", status=Status.TIMEOUT, summary=summary,
                          details=said, title="checks on this target", target=child.spec, duration_s=took,
                          fix="Run `dfdoctor check --target " + child.spec + " -v` alone to see which check hangs.")
    else:
        summary = f"dfdoctor's run on {child.spec} broke (wait status {status}): a bug in dfdoctor"
        rec = CheckRecord(id="target.checks", phase="pre", status=Status.ERROR, summary=summary, details=said,
                          title="checks on this target", target=child.spec, duration_s=took,
                          fix="Report it with the details above; run `dfdoctor check --target " + child.spec
                              + "` alone meanwhile.")
    verdict = Verdict("failed", None, summary, rec.fix, [said.splitlines()[-1]] if said.strip() else [])
    return TargetRow(child.spec, verdict, {}, took), [rec]


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""



def check_many(opts: dict, command: list[str], specs: list[str], started: str, version: str,
               pairs: list = ()) -> tuple[Report, str, dict]:
    """`check` on every spec: one row each, one verdict for all. Bad usage for any target stops before any runs,
    and so does an --output (`pairs`) that would overwrite a file any of the lines names."""
    contexts = []
    for spec in specs:
        ctx, cfg = build_context({**opts, "target": spec}, command)
        contexts.append(ctx)
    guard_many(list(pairs), contexts)
    checks, broken = choose_checks(opts, cfg, "pre")
    level = fail_on(opts, cfg)
    rows, records = run_targets(contexts, checks, broken, cfg, level, opts.get("parallel") or DEFAULT_PARALLEL)
    report = Report(tool_version=version, target=", ".join(str(c.target) for c in contexts), command=command, started_at=started,
                    finished_at=now_iso(), verdict=verdict_over_rows(rows), checks=records, timeline=[],
                    environment=environment_facts(None, []), mode="check", targets=rows)
    return report, level, contexts[0].env
