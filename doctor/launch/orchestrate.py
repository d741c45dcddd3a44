"""The steps of a job run under dfdoctor's recorder (this machine or a --target: `launch/places.py`) that its
launch and a later status share: the checks of a phase, the verdict, the post-launch checks, the report's run
object and timeline; and `status` of such a run, end to end. The launch sequence itself is `launch/pipeline.py`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor.config import Config
from dfdoctor.context import Context
from dfdoctor.diagnose.stopped import offer_stop
from dfdoctor.engine import broken_plugin_records, launch_blockers, now_iso, run_phase, target_connection
from dfdoctor.launch.cgroups import sweep_left_cgroups
from dfdoctor.launch.local import RunSource, watch
from dfdoctor.launch.remote import RemoteRun
from dfdoctor.launch.report import TIMELINE_DIGITS, placed_report, save_report
from dfdoctor.model import CheckRecord, Report, Verdict
from dfdoctor.registry import discover, select
from dfdoctor.run import record
from dfdoctor.run.folder import find_run, runs_root
from dfdoctor.agent.names import PRE_CHECKS, RECORD
from dfdoctor.placing import DEFAULT_WATCH_S, STATUS_WATCH_S  # noqa: F401  (the CLI's defaults, said here too)
from dfdoctor.run.record import RunRecord

# A rank ended while status watched: how long the others are given to end too before it says `unknown`
# (torchrun exits after its last rank; a DDP job's ranks leave seconds apart, each after its own last step).
END_GRACE_S = 10.0
END_POLL_S = 0.25


def checks_of(phase: str, only: tuple[str, ...], skip: tuple[str, ...]) -> tuple[list, list[CheckRecord]]:
    """The registered checks of one phase, filtered by --only/--skip, and an error record per plugin that could
    not be loaded (as `check` reports them). Only the built-in checks these select are imported."""
    checks, broken = discover(phase, only, skip, scope="any")
    return select(checks, only, skip, phase), broken_plugin_records(broken, phase)


def verdict_of(run: RunRecord, live: Any, watch_s: float, where: str, folders: list[str]) -> Verdict:
    """The diagnosis; for a live job started with --watch 0, plainly "started, not watched"."""
    if watch_s <= 0 and not run.finished and live is not None:
        return offer_stop(Verdict("running", None, f"The job was started{where} (pid {run.job_pid}) and not "
                                  "watched (--watch 0).", f"`dfdoctor status {run.id}` diagnoses it later.", folders),
                          run.id)
    return _diagnose(run, live)


def _diagnose(run: RunRecord, live: Any) -> Verdict:
    """The diagnosis (diagnose/verdict.py), imported when first asked: see verdict_modules."""
    from dfdoctor.diagnose.verdict import diagnose  # start-up: see verdict_modules
    return diagnose(run, live)


def verdict_modules() -> None:
    """Import what a verdict needs (the diagnosis and its readings, 0.1-0.2 s): `launch` does it while the job
    starts (launch/recorded.Meanwhile), not before the start, where it delayed the job, nor after the watch."""
    from dfdoctor.diagnose import foretold, verdict  # noqa: F401


def about_a_line_not_run(ctx: Context, r: CheckRecord) -> bool:
    """A finding of launch.path's rehearsal of the line given with --shell-command: that line's own plumbing
    (its redirect, its `&`, its session), which `launch` does not use, since the recorder starts the command
    itself. It is reported, and never stops the launch."""
    return r.id == "launch.path" and bool(ctx.shell_command) and ctx.launcher is None


def line_notes(ctx: Context, records: list[CheckRecord]) -> list[str]:
    """Evidence lines for what the rehearsal found wrong with the --shell-command line this launch did not run."""
    return [f"your line (--shell-command, not run by this launch) fails when typed: {r.summary} [{r.cause}]"
            for r in launch_blockers(records) if about_a_line_not_run(ctx, r)]


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
        from dfdoctor.diagnose import foretold  # start-up: see verdict_modules
        run, verdict = _diagnosed(source, run, live)
        run, live, verdict = _read_the_end(source, run, live, verdict)
        verdict = foretold.link(verdict, _launch_pre_checks(run_dir))
        records = post_checks(ctx, run, only, skip, cfg, report_broken=True)
    shown = save_report(run_dir, placed_report(ctx, "status", started, verdict, records, run_timeline(run),
                                              run_info(run)))
    whose = whose_run(cwd, ref, run_dir, spec.get("cwd"))
    if whose:  # said on screen only: the saved report is the run's, wherever it is shown from later
        shown.run["chosen"] = whose
    return shown


def _diagnosed(source: RunSource, run: RunRecord, live: Any) -> tuple[RunRecord, Verdict]:
    """The diagnosis of a run read here, on a record read after its recorder was seen gone. A record read while
    the recorder still ran may lack its last words (the job's exit, written as its last act); diagnosed once the
    recorder has ended, a job that just ended reads as a recorder killed hard (seen under load, the recorder
    ending between status's read and the diagnosis's look at it). So the record is read again after the
    diagnosis looked (once the recorder is gone nothing changes it any more): an exit found then decides."""
    if not run.is_remote and not run.finished and not run.recorder_alive():
        run = source.load()
    verdict = _diagnose(run, live)
    if run.is_remote or run.finished or live is not None or run.recorder_alive():
        return run, verdict
    again = source.load()
    return (again, _diagnose(again, None)) if again.finished else (run, verdict)


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
    run, verdict = _diagnosed(source, run, None)
    return run, None, verdict


def whose_run(cwd: Path, ref: Optional[str], run_dir: Path, launched_from: Optional[str]) -> str:
    """Which run `status` shows when none was named and none was launched from here: the user's latest, launched
    elsewhere (said before its verdict, which is not this folder's). '' when the run is this folder's."""
    if ref or not launched_from or Path(launched_from).resolve() == cwd.resolve() or \
            run_dir.resolve().is_relative_to(runs_root(cwd).resolve()):  # a remote run's cwd is the target's
        return ""
    return f"No run was launched from {cwd}: this is your latest run, {run_dir.name}, launched from {launched_from}."


def _launch_pre_checks(run_dir: Path) -> list[CheckRecord]:
    """The pre-launch checks the launch of this run saved in its report (none when it has no report yet)."""
    try:
        saved = json.loads((run_dir / PRE_CHECKS).read_text())
        return [CheckRecord.from_dict(c) for c in saved if c.get("phase") == "pre"]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def post_checks(ctx: Context, run: RunRecord, only: tuple[str, ...], skip: tuple[str, ...],
                cfg: Config, *, report_broken: bool = False,
                loaded: Optional[tuple[list, list[CheckRecord]]] = None) -> list[CheckRecord]:
    """The post-launch checks, told about the run through ctx.run. Broken plugins are reported once per report:
    by the pre-launch phase for `launch`, here for `status` (report_broken). `loaded`: `checks_of`'s answer for
    them, taken earlier."""
    ctx.run = run_info(run)
    checks, broken = loaded if loaded is not None else checks_of("post", only, skip)
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
        if (run.remote or {}).get("job_state"):  # as the target's agent saw the job (Z: ended, not reaped yet)
            info["job_state"] = run.remote["job_state"]
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
    "log-is-named": lambda e: f"{e['path']}: a file the command names, not opened",
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


def run_connection(cwd: Path, ref: Optional[str]) -> Any:
    """A shared connection to the target of the run `ref` names (nothing for a local run)."""
    return target_connection(Context(target=record.load(find_run(cwd, ref)).target))
