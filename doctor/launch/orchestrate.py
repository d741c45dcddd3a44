"""A launch and a later status, end to end: pre-launch checks, start (here or on the target), watch,
post-launch checks, the verdict, and the report saved in the run folder. The CLI only parses and prints."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from dfdoctor import __version__
from dfdoctor.config import Config
from dfdoctor.context import Context
from dfdoctor.diagnose import foretold
from dfdoctor.diagnose.stopped import offer_stop
from dfdoctor.diagnose.verdict import diagnose
from dfdoctor.engine import (
    broken_plugin_records,
    environment_facts,
    launch_blockers,
    not_started,
    now_iso,
    run_phase,
    target_connection,
)
from dfdoctor.launch import remote_run
from dfdoctor.launch.cgroups import sweep_left_cgroups
from dfdoctor.launch.local import RunSource, Spawner, spawn_detached, start, watch
from dfdoctor.launch.remote import RemoteRun
from dfdoctor.launch.report import TIMELINE_DIGITS, checks_event, save_report, timeline_event
from dfdoctor.watch.settle import SETTLE_S
from dfdoctor.model import CheckRecord, Report, Verdict
from dfdoctor.registry import discover, select
from dfdoctor.run import record
from dfdoctor.run.folder import DEFAULT_KEEP, RunFolder, find_run, new_run, prune, runs_root
from dfdoctor.run.masks import masked
from dfdoctor.agent.names import PRE_CHECKS, RECORD, SPEC
from dfdoctor.run.record import RunRecord
from dfdoctor.safefile import write_atomically

DEFAULT_WATCH_S = 60.0


STATUS_WATCH_S = 3.0  # status on a live job: long enough to see its output grow
# A rank ended while status watched: how long the others are given to end too before it says `unknown`
# (torchrun exits after its last rank; a DDP job's ranks leave seconds apart, each after its own last step).
END_GRACE_S = 10.0
END_POLL_S = 0.25


@dataclass
class LaunchOptions:
    """What `launch` adds to the shared options."""

    watch: float = DEFAULT_WATCH_S
    run_dir: Optional[Path] = None
    keep_runs: int = DEFAULT_KEEP
    force: bool = False
    no_check: bool = False
    memory_limit: Optional[int] = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    strategy: str = "auto"  # --target only: how the recorder is detached there
    settle: float = SETTLE_S  # how long a job must live, settled and logging, before it is called running


def _checks(phase: str, only: tuple[str, ...], skip: tuple[str, ...]) -> tuple[list, list[CheckRecord]]:
    """The registered checks of one phase, filtered by --only/--skip, and an error record per plugin that could
    not be loaded (as `check` reports them)."""
    checks, broken = discover()
    return select(checks, only, skip, phase), broken_plugin_records(broken, phase)


def run_launch(ctx: Context, cfg: Optional[Config] = None, opts: LaunchOptions = LaunchOptions(),
               spawner: Spawner = spawn_detached) -> Report:
    """Pre-launch checks, the detached start, the watch, the post-launch checks: the launch's Report."""
    cfg = cfg or Config()
    if not ctx.target.runs_here:
        return run_launch_remote(ctx, cfg, opts)
    started = now_iso()
    records, timeline, blocked = _pre(ctx, cfg, opts, started)
    if blocked is not None:
        return blocked
    log = ctx.abspath(ctx.log) if ctx.log else None
    run_dir = None
    try:
        run_id, run_dir = new_run(ctx.cwd, opts.run_dir)
        RunFolder.at(run_dir).keep_prints(ctx.env, ctx.command)
        proc = start(ctx.command, cwd=ctx.cwd, env=ctx.env, python=ctx.python, run_id=run_id, run_dir=run_dir,
                     log=log, redirect=not ctx.no_redirect, memory_limit=opts.memory_limit, spawner=spawner)
    except FileExistsError:
        raise
    except OSError as exc:  # the job was not started: nothing runs without a record
        where = run_dir or opts.run_dir or runs_root(ctx.cwd)
        verdict = Verdict("failed", None, f"Not launched: the run folder {where} could not be written "
                          f"({exc.strerror or exc}).", "Free space there or choose a writable --run-dir, then "
                          "launch again.", [f"{type(exc).__name__}: {exc}"])
        return _report(ctx, "launch", started, verdict, records, timeline, None)
    prune(ctx.cwd, opts.keep_runs)  # after the start, so the new run counts and is never the one pruned
    run, live = watch(RunSource(run_dir, proc, opts.watch, settle_s=opts.settle))
    verdict = foretold.link(_verdict(run, live, opts.watch, "", [f"run folder: {run.dir}"]), records)
    verdict.evidence += _line_notes(ctx, records)
    records += _post(ctx, run, opts.only, opts.skip, cfg, report_broken=opts.no_check)
    report = save_report(run_dir, _report(ctx, "launch", started, verdict, records, timeline + run_timeline(run), run))
    _keep_pre_checks(run_dir, report)
    RunFolder.at(run_dir).append_event("detached", verdict=verdict.state, cause=verdict.cause)
    proc.poll()  # reap a recorder that already finished
    return report


def _verdict(run: RunRecord, live: Any, watch_s: float, where: str, folders: list[str]) -> Verdict:
    """The diagnosis; for a live job started with --watch 0, plainly "started, not watched"."""
    if watch_s <= 0 and not run.finished and live is not None:
        return offer_stop(Verdict("running", None, f"The job was started{where} (pid {run.job_pid}) and not "
                                  "watched (--watch 0).", f"`dfdoctor status {run.id}` diagnoses it later.", folders),
                          run.id)
    return diagnose(run, live)


def _pre(ctx: Context, cfg: Config, opts: LaunchOptions,
         started: str) -> tuple[list[CheckRecord], list[dict[str, Any]], Optional[Report]]:
    """The pre-launch checks; a finding that guarantees failure stops the launch (the Report says why)."""
    records: list[CheckRecord] = []
    timeline: list[dict[str, Any]] = []
    if opts.no_check:
        return records, timeline, None
    began = time.time()
    checks, broken = _checks("pre", opts.only, opts.skip)
    records = broken + run_phase(ctx, checks, "pre", cfg)
    timeline.append(checks_event(records, began))
    blockers = [r for r in launch_blockers(records) if not _about_a_line_not_run(ctx, r)] + \
        foretold.certain(records, list(ctx.command), ctx.cwd)
    if blockers and not opts.force:
        verdict = not_started(blockers, not_done="Not launched", subject="the launch",
                              force="--force launches anyway")
        return records, timeline, _report(ctx, "launch", started, verdict, records, timeline, None)
    return records, timeline, None


def _about_a_line_not_run(ctx: Context, r: CheckRecord) -> bool:
    """A finding of launch.path's rehearsal of the line given with --shell-command: that line's own plumbing
    (its redirect, its `&`, its session), which `launch` does not use, since the recorder starts the command
    itself. It is reported, and never stops the launch."""
    return r.id == "launch.path" and bool(ctx.shell_command) and ctx.launcher is None


def _line_notes(ctx: Context, records: list[CheckRecord]) -> list[str]:
    """Evidence lines for what the rehearsal found wrong with the --shell-command line this launch did not run."""
    return [f"your line (--shell-command, not run by this launch) fails when typed: {r.summary} [{r.cause}]"
            for r in launch_blockers(records) if _about_a_line_not_run(ctx, r)]


def run_launch_remote(ctx: Context, cfg: Config, opts: LaunchOptions) -> Report:
    """`launch --target`: checks there, the recorder shipped there and detached, the record read back through
    the transport into a local copy (`.dfdoctor/runs/<id>` here), the same watch and the same rules."""
    started = now_iso()
    with target_connection(ctx):  # one ssh connection for the checks, the start and every look
        records, timeline, blocked = _pre(ctx, cfg, opts, started)
        if blocked is not None:
            return blocked
        run_id, run_dir = new_run(Path.cwd())
        folder = RunFolder.at(run_dir)
        folder.keep_prints(ctx.env, ctx.command)
        log = str(ctx.abspath(ctx.log)) if ctx.log else None
        spec = {"run_id": run_id, "argv": list(ctx.command), "cwd": str(ctx.cwd), "log": log,
                "redirect": not ctx.no_redirect, "memory_limit": opts.memory_limit, "python": ctx.python,
                "watch_pids": [], "launcher": {"target": str(ctx.target), "local_pid": os.getpid()},
                "started_by": "dfdoctor launch --target"}
        shipped = remote_run.ship_recorder(ctx.target, spec=spec, run_id=run_id, cwd=str(ctx.cwd),
                                           python=ctx.python, strategy=opts.strategy,
                                           run_dir=str(opts.run_dir) if opts.run_dir else None,
                                           keep=opts.keep_runs)
        local_spec = dict(spec, target=str(ctx.target), remote_dir=shipped.run_dir, remote_python=shipped.python,
                          strategy=shipped.strategy, strategy_line=shipped.line)
        write_atomically(run_dir / SPEC, json.dumps(masked(local_spec, ctx.env, ctx.command), indent=1),
                         private=True)
        folder.append_event("launched", recorder_pid=shipped.pid, argv=list(ctx.command), target=str(ctx.target),
                            remote_dir=shipped.run_dir, strategy=shipped.strategy,
                            session_s=round(shipped.session_s, 3), error=shipped.error,
                            recorder_fallback=shipped.fallback_from)
        prune(Path.cwd(), opts.keep_runs)
        if shipped.error:
            verdict = Verdict("failed", None, f"The recorder could not be started on {ctx.target}: the job was "
                              "not launched.", "Make the target reachable and its python3 runnable "
                              "(`dfdoctor check --target ...` says which), then launch again.",
                              [f"starting session ({shipped.strategy}): {shipped.error}"])
            run = record.load(run_dir)
            report = _report(ctx, "launch", started, verdict, records, timeline + run_timeline(run), run)
            return save_report(run_dir, report)
        remote = RemoteRun(ctx.target, shipped.run_dir, shipped.python)
        run, live = watch(remote.source(run_dir, opts.watch, settle_s=opts.settle))
        verdict = foretold.link(_verdict(run, live, opts.watch, f" on {ctx.target}",
                                         [f"run folder there: {shipped.run_dir}", f"local copy: {run.dir}"]), records)
        verdict.evidence += _line_notes(ctx, records)
        records += _post(ctx, run, opts.only, opts.skip, cfg, report_broken=opts.no_check)
    report = save_report(run_dir, _report(ctx, "launch", started, verdict, records, timeline + run_timeline(run), run))
    _keep_pre_checks(run_dir, report)
    folder.append_event("detached", verdict=verdict.state, cause=verdict.cause)
    return report


def run_status(cwd: Path, ref: Optional[str] = None, cfg: Optional[Config] = None, watch_s: float = STATUS_WATCH_S,
               only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> Report:
    """Diagnose a run again from its folder, whether its job still runs or ended long ago."""
    cfg = cfg or Config()
    started = now_iso()
    run_dir = find_run(cwd, ref)
    sweep_left_cgroups(cwd)
    run = record.load(run_dir)
    spec = run.spec
    ctx = Context(command=list(spec.get("argv") or []), cwd=Path(spec.get("cwd") or cwd),
                  python=spec.get("python") or "python3", log=Path(spec["log"]) if spec.get("log") else None,
                  no_redirect=not spec.get("redirect", True), target=run.target)
    with target_connection(ctx):
        source = RunSource(run_dir, None, watch_s)
        if run.is_remote and spec.get("remote_dir"):  # read the record where the job runs, into the copy here
            remote = RemoteRun.of(run)
            source = remote.source(run_dir, watch_s)
            run = remote.load(run_dir, full=True)
        live = None
        if not run.finished and run.recorder_alive():
            if watch_s > 0:
                run, live = watch(source)
            else:  # no time to see output grow: judge by what the job looks like now
                live = source.look(run, 0.0)
        if not run.is_remote and not run.finished and not run.recorder_alive():
            # read before its recorder ended, which wrote the job's exit as its last act: read again (once it is
            # gone, nothing changes the record any more), or a job that just ended is a recorder killed hard
            run = source.load()
        run, live, verdict = _read_the_end(source, run, live, diagnose(run, live))
        verdict = foretold.link(verdict, _launch_pre_checks(run_dir))
        records = _post(ctx, run, only, skip, cfg, report_broken=True)
    shown = save_report(run_dir, _report(ctx, "status", started, verdict, records, run_timeline(run), run))
    whose = whose_run(cwd, ref, run_dir, spec.get("cwd"))
    if whose:  # said on screen only: the saved report is the run's, wherever it is shown from later
        shown.run["chosen"] = whose
    return shown


def _read_the_end(source: RunSource, run: RunRecord, live: Any, verdict: Verdict) -> tuple[RunRecord, Any, Verdict]:
    """Before `unknown` about a job whose rank ended while status watched (a DDP job's ranks end one after
    another: torchrun exits after the last), read the end again: the record until the job's exit is in it, for
    END_GRACE_S at most. A job that just ended is judged by its end; one that did not is still `unknown`, with
    what the record and the log say of the ending (which ranks ended, the log's last lines)."""
    settling = source.settling
    lost = list(settling.lost) or ([f"{settling.absent} rank(s) no longer run"] if settling.absent else [])
    if verdict.state != "unknown" or run.finished or not lost:
        return run, live, verdict
    deadline = time.monotonic() + END_GRACE_S
    while time.monotonic() < deadline and not run.finished and run.recorder_alive():
        time.sleep(END_POLL_S)
        run = source.load()
    if not run.finished and run.recorder_alive():
        tail = [f"the log's last line: {line}" for line in run.stream("stdout", 4096).splitlines()[-3:]]
        verdict.evidence += [f"read again {END_GRACE_S:.0f} s later: {'; '.join(lost)}, and the job has not "
                             "ended (its recorder wrote no exit)", *tail]
        return run, live, verdict
    return run, None, diagnose(run, None)


def whose_run(cwd: Path, ref: Optional[str], run_dir: Path, launched_from: Optional[str]) -> str:
    """Which run `status` shows when none was named and none was launched from here: the user's latest, launched
    elsewhere (said before its verdict, which is not this folder's). '' when the run is this folder's."""
    if ref or not launched_from or Path(launched_from).resolve() == cwd.resolve() or \
            run_dir.resolve().is_relative_to(runs_root(cwd).resolve()):  # a remote run's cwd is the target's
        return ""
    return f"No run was launched from {cwd}: this is your latest run, {run_dir.name}, launched from {launched_from}."


def _keep_pre_checks(run_dir: Path, report: Report) -> None:
    """Keep the launch's pre-launch findings (masked, as saved in its report) for `status` to connect its verdict
    to them later; report.json itself is rewritten by every status."""
    pre = [c.to_dict() for c in report.checks if c.phase == "pre"]
    try:
        write_atomically(run_dir / PRE_CHECKS, json.dumps(pre, default=str), private=True)
    except OSError:
        pass  # only the link to the pre-launch checks is lost; save_report already reported a full disk


def _launch_pre_checks(run_dir: Path) -> list[CheckRecord]:
    """The pre-launch checks the launch of this run saved in its report (none when it has no report yet)."""
    try:
        saved = json.loads((run_dir / PRE_CHECKS).read_text())
        return [CheckRecord.from_dict(c) for c in saved if c.get("phase") == "pre"]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def _post(ctx: Context, run: RunRecord, only: tuple[str, ...], skip: tuple[str, ...],
          cfg: Config, *, report_broken: bool = False) -> list[CheckRecord]:
    """The post-launch checks, told about the run through ctx.run. Broken plugins are reported once per report:
    by the pre-launch phase for `launch`, here for `status` (report_broken)."""
    ctx.run = run_info(run)
    checks, broken = _checks("post", only, skip)
    return (broken if report_broken else []) + (run_phase(ctx, checks, "post", cfg) if checks else [])


def run_info(run: Optional[RunRecord]) -> dict[str, Any]:
    """The `run` object of the report (and of ctx.run for post-launch checks)."""
    if run is None:
        return {"dir": None, "pid": None, "exit_code": None, "signal": None}
    ex = run.exit or {}
    info = {"id": run.id, "dir": str(run.dir), "pid": run.job_pid, "exit_code": ex.get("exit_code"),
            "signal": ex.get("signal"), "record": str(run.dir / RECORD), "log": run.spec.get("log"),
            "recorder_pid": (run.recorder or {}).get("pid"), "finished": run.finished}
    if run.is_remote:
        info.update(target=run.spec.get("target"), remote_dir=run.spec.get("remote_dir"),
                    strategy=run.spec.get("strategy"))
    return info


def run_timeline(run: RunRecord) -> list[dict[str, Any]]:
    """What happened to the job, in order, as the report's timeline."""
    out = []
    for e in sorted(run.events + run.launcher, key=lambda e: e["t"]):
        detail = _DETAIL.get(e["event"], lambda e: "")(e)
        if e["event"] in _DETAIL:
            out.append({"t": round(e["t"], TIMELINE_DIGITS), "event": e["event"], "detail": detail})
    return out


_DETAIL = {
    "launched": lambda e: f"recorder pid {e.get('recorder_pid')}",
    "recorder": lambda e: f"recorder pid {e['pid']} on {e.get('host')} ({e.get('python')})",
    "log-open-failed": lambda e: f"{e['path']}: {e.get('strerror')}",
    "spawn-failed": lambda e: f"{e.get('filename') or e.get('argv')}: {e.get('strerror')}",
    "spawned": lambda e: f"pid {e['pid']}: {' '.join(e.get('argv') or [])}",
    "output": lambda e: f"first bytes on {e['stream']}",
    "log-appeared": lambda e: e["path"],
    "log-grew": lambda e: f"{e['path']} ({e['size']} bytes)",
    "signal": lambda e: e["signal"] + (" (passed on to the job)" if e.get("forwarded") else ""),
    "launcher-gone": lambda e: f"{e.get('role')} pid {e.get('pid')} ended",
    "exit": lambda e: f"signal {e['signal']}" if e.get("signal") else f"status {e.get('exit_code')}",
    "detached": lambda e: f"dfdoctor returned ({e.get('verdict')})",
    "stopped": lambda e: f"dfdoctor stop: {len(e.get('stopped') or [])} process(es) ended"
               + (f", {len(e['survived'])} still running" if e.get("survived") else ""),
    "memory-limit": lambda e: f"{e['limit'] / 2**20:.0f} MiB in {e.get('cgroup')}",
    "memory-limit-failed": lambda e: f"NOT applied: {e.get('error')}",
}




def _report(ctx: Context, mode: str, started: str, verdict: Verdict, records: list[CheckRecord],
            timeline: list[dict[str, Any]], run: Optional[RunRecord]) -> Report:
    """Assemble the Report of a launch or status run."""
    return Report(tool_version=__version__, target=str(ctx.target), command=list(ctx.command), started_at=started,
                  finished_at=now_iso(), verdict=verdict, checks=records,
                  timeline=timeline + [timeline_event("verdict", f"{verdict.state} {verdict.cause or ''}".strip())],
                  run=run_info(run), environment=environment_facts(ctx, records), mode=mode)


def run_connection(cwd: Path, ref: Optional[str]) -> Any:
    """A shared connection to the target of the run `ref` names (nothing for a local run)."""
    return target_connection(Context(target=record.load(find_run(cwd, ref)).target))
