"""The answers of this machine's and a --target's placements (`launch/places.py`): the job started under dfdoctor's
flight recorder, here or shipped to the target and detached there, its record read back (over the kind's
transport) and judged by the same rules. Imported when a placement is first asked, not at start-up."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from dfdoctor.agent.names import SPEC
from dfdoctor.config import Config
from dfdoctor.context import Context
from dfdoctor.engine import check_selection, launch_blockers, run_phase, target_connection
from dfdoctor.launch import remote_run
from dfdoctor.launch.spawn import start
from dfdoctor.model import Verdict
from dfdoctor.run import record
from dfdoctor.run.folder import DEFAULT_KEEP, RunFolder, find_run, new_run, prune, runs_root
from dfdoctor.run.masks import masked
from dfdoctor.safefile import write_atomically

if TYPE_CHECKING:  # annotations only: the answers are made where they are built (placing_answers.py)
    from dfdoctor.placing_answers import Judged, LaunchAsk, Started, Stopped


def _orchestrate() -> Any:
    """launch/orchestrate.py and the watch's modules it brings, imported once the job started: before the start
    they delayed the job (a fifth of what `launch --no-check` imported first: issue 45)."""
    from dfdoctor.launch import orchestrate  # start-up: see the docstring
    return orchestrate


# ---- what this machine and a --target share (their `check` is launch/checked.py's) ------------------------


def prepare(ask: LaunchAsk) -> LaunchAsk:
    """The config's --only/--skip joined to the command line's (an --only that matches nothing: bad usage), and
    its keep-runs."""
    cfg = ask.cfg or Config()
    only, skip = check_selection({"only": ask.only, "skip": ask.skip}, cfg)
    return replace(ask, only=only, skip=skip, cfg=cfg, keep_runs=ask.keep_runs or int(cfg.get("keep-runs",
                                                                                           DEFAULT_KEEP)))


def pre_checks(ctx: Any, ask: LaunchAsk) -> list:
    """Here, every check run to its end; on a --target, those that can stop the launch (launch/gated.py: the
    others go on beside the start, and `judged` waits for them)."""
    if ctx.target.runs_here:  # a local probe server lives only as long as run_phase
        checks, broken = _orchestrate().checks_of("pre", ask.only, ask.skip)
        return broken + run_phase(ctx, checks, "pre", ask.cfg)
    from dfdoctor.launch import gated  # start-up: a --target launch's alone
    checks, broken = gated.loaded(ask.only, ask.skip) or _orchestrate().checks_of("pre", ask.only, ask.skip)
    return gated.pre_checks(ctx, checks, broken, ask.cfg)


def blockers(ctx: Any, records: list) -> list:
    """Those that guarantee failure, less what the rehearsal found in a --shell-command line this launch does not
    run (reported, never blocking), plus what a known failure foretells of the command."""
    from dfdoctor.diagnose import foretold  # start-up: see orchestrate.verdict_modules
    return [r for r in launch_blockers(records) if not _orchestrate().about_a_line_not_run(ctx, r)] + \
        foretold.certain(records, list(ctx.command), ctx.cwd)


class Meanwhile:
    """What the verdict needs, loaded in a thread while the job starts and the watch goes on: the diagnosis'
    modules and the post-launch checks (every check is imported to find those: 0.2-0.4 s). Before the start it
    delayed the job, after the watch the verdict's report (issue 45); in the watch's own thread, a watch of a
    job that ripens sooner than it loads (a loaded machine) was held up by it."""

    def __init__(self, ask: LaunchAsk) -> None:
        self.ask, self.loaded = ask, None
        self.thread = threading.Thread(target=self._load, name="dfdoctor-meanwhile", daemon=True)
        self.thread.start()

    def _load(self) -> None:
        try:
            orchestrate = _orchestrate()
            orchestrate.verdict_modules()
            self.loaded = orchestrate.checks_of("post", self.ask.only, self.ask.skip)
        except Exception:  # the verdict loads what it needs itself then, and says what failed
            self.loaded = None

    def post_checks(self) -> Optional[tuple[list, list]]:
        """`orchestrate.checks_of("post", ...)`'s answer, once loaded (None: load them now)."""
        self.thread.join()
        return self.loaded


def judged(ctx: Any, ask: LaunchAsk, run: Any, live: Any, records: list, where: str, folders: list[str],
           loaded: Optional[Meanwhile] = None) -> Judged:
    """The verdict (linked to a pre-launch finding that foretold it), then the post-launch checks."""
    from dfdoctor.diagnose import foretold  # start-up: see orchestrate.verdict_modules
    from dfdoctor.launch.gated import complete
    from dfdoctor.placing_answers import Judged  # imported here: `status` imports this module, makes none
    orchestrate = _orchestrate()
    records = complete(records)  # the checks run beside the start (a --target's) have ended: the verdict reads all
    verdict = foretold.link(orchestrate.verdict_of(run, live, ask.watch_s, where, folders), records)
    verdict.evidence += orchestrate.line_notes(ctx, records)
    post = orchestrate.post_checks(ctx, run, ask.only, ask.skip, ask.cfg, report_broken=ask.no_check,
                                   loaded=loaded.post_checks() if loaded is not None else None)
    return Judged(verdict, orchestrate.run_info(run), orchestrate.run_timeline(run), post)


def finish(ctx: Any, report: Any) -> None:
    """The user's typed line stays in every output (issue 39); a typed line that failed before its job started is
    offered a line that works, when one was seen to."""
    report.command_as_typed = ctx.typed_line or ""
    if ctx.typed_line and report.verdict.state == "failed" and not report.run.get("pid"):
        from dfdoctor.rehearse.fix import offer_working_line  # start-up: see engine.default_python
        offer_working_line(ctx, report)


def status(cwd: Path, ref: Optional[str], watch_s: float, cfg: Any, only: tuple[str, ...],
           skip: tuple[str, ...]) -> Any:
    cfg = cfg or Config()
    only, skip = check_selection({"only": only, "skip": skip}, cfg)
    return _orchestrate().run_status(cwd, ref, cfg, watch_s, only, skip)


def run_folders(cwd: Path, ref: Optional[str]) -> tuple[Path, ...]:
    return (find_run(cwd, ref),)


def connected_to_run(cwd: Path, ref: Optional[str]) -> Any:
    return _orchestrate().run_connection(cwd, ref)


# ---- this machine -----------------------------------------------------------------------------------------
def start_here(ctx: Any, ask: LaunchAsk) -> Started:
    """The recorder started detached here (it starts the job), in a new run folder."""
    from dfdoctor.placing_answers import Started  # imported here: see judged
    log = ctx.abspath(ctx.log) if ctx.log else None
    refused = _log_is_named(ctx, log)
    if refused is not None:
        return Started("", None, refused=refused)
    run_dir = None
    try:
        run_id, run_dir = new_run(ctx.cwd, ask.run_dir)
        RunFolder.at(run_dir).keep_prints(ctx.env, ctx.command)
        proc = start(ctx.command, cwd=ctx.cwd, env=ctx.env, python=ctx.python, run_id=run_id, run_dir=run_dir,
                     log=log, redirect=not ctx.no_redirect, memory_limit=ask.memory_limit)
    except FileExistsError:
        raise
    except OSError as exc:  # the job was not started: nothing runs without a record
        where = run_dir or ask.run_dir or runs_root(ctx.cwd)
        verdict = Verdict("failed", None, f"Not launched: the run folder {where} could not be written "
                          f"({exc.strerror or exc}).", "Free space there or choose a writable --run-dir, then "
                          "launch again.", [f"{type(exc).__name__}: {exc}"])
        return Started("", None, refused=verdict)
    prune(ctx.cwd, ask.keep_runs)  # after the start, so the new run counts and is never the one pruned
    return Started(run_id, run_dir, handle=proc)


def _log_is_named(ctx: Any, log: Optional[Path]) -> Optional[Verdict]:
    """The launch refused when the log is a file the command names for another purpose (its script, a config):
    the recorder would append the job's output to it. Said here too, so that `--no-check` and `--force` never
    write into it (log.writable says it before the start; on a --target the recorder there says it)."""
    if log is None or ctx.no_redirect:
        return None
    from dfdoctor.diagnose.log_is_input import refusal  # start-up: a launch with --log alone
    from dfdoctor.named_files import named_by, put_to_another_purpose
    named = named_by(ctx)
    same = put_to_another_purpose(str(log), named)
    return refusal(str(ctx.log), str(log), named, same[0]) if same else None


def watch_here(ctx: Any, ask: LaunchAsk, job: Started, records: list) -> Judged:
    from dfdoctor.launch.local import RunSource, watch  # start-up: see _orchestrate
    loaded = Meanwhile(ask)
    run, live = watch(RunSource(job.run_dir, job.handle, ask.watch_s, settle_s=ask.settle_s))
    out = judged(ctx, ask, run, live, records, "", [f"run folder: {run.dir}"], loaded)
    job.handle.poll()  # reap a recorder that already finished
    return out


def stop_here(run_dir: Path, run: Any, grace_s: float) -> Stopped:
    """The agent's stop, in this process: it proves which processes are the job's where they run."""
    from dfdoctor.agent import stop as agent_stop  # start-up: `stop` alone needs it
    return _stopped(run_dir, run.id, "", agent_stop.stop(str(run_dir), grace_s))


# ---- a --target of any kind -------------------------------------------------------------------------------
@contextlib.contextmanager
def connected_there(ctx: Any) -> Iterator[None]:
    """The shared connection; a checked launch's relay is opened on it at once (launch/gated.py), its end here
    started while ssh logs in."""
    from dfdoctor.launch import gated  # start-up: a --target launch's alone
    with gated.relay_meanwhile(ctx) as connected, target_connection(ctx):
        connected()
        yield


def start_there(ctx: Any, ask: LaunchAsk) -> Started:
    """The recorder shipped to the target and detached there; the run folder here is the local copy of its record
    (its spec names the target with every part its spelling leaves out: `record.target_parts`)."""
    from dfdoctor.placing_answers import Started  # imported here: see judged
    run_id, run_dir = new_run(Path.cwd())
    folder = RunFolder.at(run_dir)
    folder.keep_prints(ctx.env, ctx.command)
    log = str(ctx.abspath(ctx.log)) if ctx.log else None
    spec = {"run_id": run_id, "argv": list(ctx.command), "cwd": str(ctx.cwd), "log": log,
            "redirect": not ctx.no_redirect, "memory_limit": ask.memory_limit, "python": ctx.python,
            "watch_pids": [], "launcher": {"target": str(ctx.target), "local_pid": os.getpid()},
            "started_by": "dfdoctor launch --target", **_named_for_the_recorder(ctx)}
    shipped = remote_run.ship_recorder(ctx.target, spec=spec, run_id=run_id, cwd=str(ctx.cwd),
                                       python=ctx.python, strategy=ask.strategy,
                                       run_dir=str(ask.run_dir) if ask.run_dir else None, keep=ask.keep_runs)
    local_spec = dict(spec, target=str(ctx.target), remote_dir=shipped.run_dir, remote_python=shipped.python,
                      strategy=shipped.strategy, strategy_line=shipped.line, **record.target_parts(ctx.target))
    write_atomically(run_dir / SPEC, json.dumps(masked(local_spec, ctx.env, ctx.command), indent=1), private=True)
    folder.append_event("launched", recorder_pid=shipped.pid, argv=list(ctx.command), target=str(ctx.target),
                        remote_dir=shipped.run_dir, strategy=shipped.strategy,
                        session_s=round(shipped.session_s, 3), error=shipped.error,
                        recorder_fallback=shipped.fallback_from)
    prune(Path.cwd(), ask.keep_runs)
    if shipped.error:
        verdict = Verdict("failed", None, f"The recorder could not be started on {ctx.target}: the job was "
                          "not launched.", "Make the target reachable and its python3 runnable "
                          "(`dfdoctor check --target ...` says which), then launch again.",
                          [f"starting session ({shipped.strategy}): {shipped.error}"])
        run = record.load(run_dir)
        return Started(run_id, run_dir, refused=verdict, run=_orchestrate().run_info(run),
                       timeline=_orchestrate().run_timeline(run))
    return Started(run_id, run_dir, handle=shipped)


def _named_for_the_recorder(ctx: Any) -> dict:
    """The files the command names (`named_files.named_by`), for the recorder on the target: whether the log is one
    of them is judged there, before it opens the log (nothing here can stat the target's paths), and a `--no-check`
    start had no other look."""
    if not ctx.log or ctx.no_redirect:
        return {}
    from dfdoctor.named_files import named_by  # start-up: a launch with --log alone
    named = named_by(ctx)
    return {"named": [[n.path, n.role, n.word] for n in named]} if named else {}


def watch_there(ctx: Any, ask: LaunchAsk, job: Started, records: list) -> Judged:
    from dfdoctor.launch.local import watch  # start-up: see _orchestrate
    from dfdoctor.launch.remote import RemoteRun
    shipped = job.handle
    remote = RemoteRun(ctx.target, shipped.run_dir, shipped.python)
    loaded = Meanwhile(ask)
    run, live = watch(remote.source(job.run_dir, ask.watch_s, settle_s=ask.settle_s))
    return judged(ctx, ask, run, live, records, f" on {ctx.target}",
                  [f"run folder there: {shipped.run_dir}", f"local copy: {run.dir}"], loaded)


def stop_there(run_dir: Path, run: Any, grace_s: float) -> Stopped:
    """The agent's stop, sent to the target over one session; the record's last words fetched into the copy."""
    from dfdoctor.placing_answers import Stopped  # imported here: see judged
    target = run.target
    where = f"on {target}"
    if not run.spec.get("remote_dir"):
        return Stopped(run.id, where, error="its recorder never started there: no job to stop")
    python = run.spec.get("remote_python") or "python3"
    with target_connection(Context(target=target)):
        answer = remote_run.stop(target, run.spec["remote_dir"], python=python, grace_s=grace_s)
        fetched = remote_run.fetch(target, run.spec["remote_dir"], python=python, full=True)
    if "error" not in fetched:  # the record's last words (the job's end) into the local copy
        record.mirror(run_dir, fetched)
    return _stopped(run_dir, run.id, where, answer)


def _stopped(run_dir: Path, run: str, where: str, answer: dict[str, Any]) -> Stopped:
    """The agent's answer as a Stopped, its command lines masked."""
    from dfdoctor.placing_answers import Stopped  # imported here: see judged
    if "error" in answer:
        return Stopped(run, where, error=answer["error"])
    answer = _masked(run_dir, answer)
    return Stopped(run, where, answer["stopped"], answer["gone"], answer["unproven"], answer["survived"],
                   answer["errors"], answer["recorder"], bool(answer["was_running"] and answer["stopped"]))


def _masked(run_dir: Path, answer: dict[str, Any]) -> dict[str, Any]:
    """The agent's answer with the launch's secrets masked: it names processes by their raw command lines."""
    folder = RunFolder.at(run_dir)
    red = folder.masker()
    red.learn_prints(folder.prints, answer)
    for e in answer.get("stopped") or []:
        red.learn_argv((e.get("cmdline") or "").split())
    return red.value(answer)
