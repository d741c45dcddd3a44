"""`dfdoctor launch` and `dfdoctor status`: start a job under the flight recorder, and judge it, now or later."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import click
from dfdoctor.cli.options import (
    Seconds,
    examples,
    launch_options,
    output_options,
    name_config,
    pass_opts,
    single_target,
    validate_outputs,
)
from dfdoctor.config import load
from dfdoctor.engine import build_context, emit, exit_code, fail_on, guard
from dfdoctor.launch import pipeline
from dfdoctor.watch.settle import SETTLE_S
from dfdoctor.run.folder import DEFAULT_KEEP, RunNotFound, list_runs, runs_root
from dfdoctor import placements
from dfdoctor.placing import DEFAULT_WATCH_S, STATUS_WATCH_S
from dfdoctor.terminate import (EXIT as TERMINATED_EXIT, Seen, Terminated, sigterm_as_interrupt, started_since,
                                still_running_line)
from dfdoctor.targets.strategies import BY_NAME
from dfdoctor.lazy_re import compile_later

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def _strategy_help() -> str:
    """Each --strategy and what it does, from the strategies' own words: read here, with `launch`'s options, not
    with the options every command shares (it imports the shipping of the recorder: 0.005 CPU-s of each start)."""
    from dfdoctor.targets.strategies import STRATEGIES
    return "; ".join(f"{s.name}: {s.words.removeprefix('started ')}" for s in STRATEGIES)


STRATEGY_HELP = ("With --target: how the recorder is detached there. auto: what persistence.session "
                 "found best for that target, else the recorder's own SIGHUP-ignoring setsid hand-off; "
                 + _strategy_help() + ".")


# ---- command line -------------------------------------------------------------------------------------
_SIZE = compile_later(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)


class MemSize(click.ParamType):
    """A memory size: bytes, or with a K/M/G/T suffix (powers of 1024)."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        """Parse `512M`, `2G`, `1.5g` or plain bytes."""
        if isinstance(value, int):
            return value
        m = _SIZE.match(str(value))
        if not m:
            self.fail(f"{value!r} is not a size like 512M or 2G", param, ctx)
        unit = m[2].lower()
        return int(float(m[1]) * 1024 ** ("_kmgt".index(unit) if unit else 0))


@click.command("launch", context_settings={**CONTEXT, "allow_interspersed_args": False}, epilog=examples("launch"))
@launch_options
@click.option("--no-redirect", is_flag=True, help="The job writes --log itself; its output stays in the run folder.")
@click.option("--watch", type=Seconds(positive=False), default=None,
              help=f"Longest time to watch the new job before the verdict (default {DEFAULT_WATCH_S:g} s).")
@click.option("--settle", type=Seconds(positive=False), default=None,
              help=f"How long the job must live, its output growing and all its processes started, before it is "
                   f"called running (default {SETTLE_S:g} s, never longer than --watch; 0: as soon as it logs).")
@click.option("--no-check", is_flag=True, help="Skip the pre-launch checks.")
@click.option("--force", is_flag=True, help="Launch even when a pre-launch check says it cannot work.")
@click.option("--run-dir", type=click.Path(file_okay=False), help="The run folder (default .dfdoctor/runs/<id>).")
@click.option("--keep-runs", type=click.IntRange(min=1), default=None,
              help=f"How many run folders to keep under .dfdoctor/runs (default {DEFAULT_KEEP}).")
@click.option("--memory-limit", type=MemSize(), default=None,
              help="Run the job in its own memory cgroup with this limit (e.g. 2G): a real OOM kill, not a dead host.")
@click.option("--strategy", type=click.Choice(["auto", *BY_NAME]), default="auto", show_default=True,
              help=STRATEGY_HELP)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_opts
def launch(opts: dict[str, Any]) -> int:
    """Check, start COMMAND detached under the flight recorder, watch it, and say why it is or is not running."""
    pairs = validate_outputs(opts)
    command = list(opts["command"])
    opts["target"] = single_target(opts, "launch")
    opts["target"], command = placements.through_target(opts["target"], command)  # ray://HEAD: Ray's own line
    opts["launching"] = True  # a launch line after `--` is replaced by dfdoctor's own start, not rehearsed
    ctx, cfg = build_context(opts, command)
    if ctx.typed_line:
        from dfdoctor.launchline.typed import launch_note  # start-up: see engine.default_python
        click.echo(launch_note(ctx), err=True)
    run_dir = Path(opts["run_dir"]).absolute() if opts["run_dir"] else None
    guard(pairs, ctx, (runs_root(ctx.cwd if ctx.target.runs_here else Path.cwd()),
                       *((run_dir,) if run_dir and ctx.target.runs_here else ())))
    placement = placements.of_line(ctx)  # this machine, a --target, or a scheduler's line (sbatch, ray job submit)
    from dfdoctor.placing_answers import LaunchAsk  # imported here: `status` (this module too) asks none (issue 45)
    ask = LaunchAsk(watch_s=opts["watch"] if opts["watch"] is not None else float(cfg.get("watch", DEFAULT_WATCH_S)),
                    run_dir=run_dir, force=opts["force"], no_check=opts["no_check"],
                    only=tuple(opts.get("only") or ()), skip=tuple(opts.get("skip") or ()), cfg=cfg,
                    settle_s=opts["settle"] if opts["settle"] is not None else float(cfg.get("settle", SETTLE_S)),
                    keep_runs=opts["keep_runs"] or 0, memory_limit=opts["memory_limit"], strategy=opts["strategy"])
    level = fail_on(opts, cfg)
    # the verdict is printed while the ssh connection is still open: closing it takes a second or so
    here = ctx.cwd if ctx.target.runs_here else Path.cwd()  # where this launch's run folder goes (a copy, remote)
    before = set(list_runs(here))
    placement.meanwhile(ctx, ask)  # a --target's checks are imported while ssh logs in
    with placement.connected(ctx), _sigterm_watch(placement) as seen:  # SIGTERM ends the watch as Ctrl-C does
        try:
            report = pipeline.launch(placement, ctx, ask)
        except FileExistsError as exc:
            raise click.UsageError(str(exc)) from None
        except Terminated:  # outside the watch: before the start (nothing runs), or after it (say which run)
            run = started_since(before, here, run_dir)
            if run is None:
                raise
            click.echo(still_running_line({"id": run.id, "pid": run.job_pid}, ctx.target, run.finished), err=True)
            return TERMINATED_EXIT
        name_config(report, cfg)
        emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level,
             env=ctx.env)
    if seen.terminated:
        ended = report.run.get("exit_code") is not None or report.run.get("signal") is not None
        click.echo(still_running_line(report.run, ctx.target, ended), err=True)
        return TERMINATED_EXIT
    return exit_code(report, level)


def _sigterm_watch(placement: Any) -> Any:
    """SIGTERM taken as Ctrl-C for a placement whose job runs on without dfdoctor (`sigterm_ends_watch`);
    otherwise nothing changes (a noted Seen that never sees it)."""
    return sigterm_as_interrupt() if placement.sigterm_ends_watch else contextlib.nullcontext(Seen())


@click.command("status", context_settings=CONTEXT, epilog=examples("status"))
@click.argument("run", required=False)
@click.option("--cwd", type=click.Path(file_okay=False), default=None,
              help="Where the runs are (.dfdoctor/runs under it; default: here).")
@click.option("--watch", type=Seconds(positive=False), default=STATUS_WATCH_S, show_default=True,
              help="For a live job: how long to watch its output grow.")
@click.option("--only", multiple=True, help="Post-launch checks to run (glob); repeatable.")
@click.option("--skip", multiple=True, help="Post-launch checks to skip (glob); repeatable.")
@output_options
@pass_opts
def status(opts: dict[str, Any]) -> int:
    """Diagnose a launched RUN again from its run folder (default: the latest run)."""
    pairs = validate_outputs(opts)
    cwd = Path(opts["cwd"] or ".").resolve()
    try:
        cfg = load(cwd)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    level = fail_on(opts, cfg)
    placement = placements.of_ref(cwd, opts["run"])  # slurm:JOBID, ray:ID, or the placement that made the run
    try:
        guard(pairs, run_folders=placement.run_folders(cwd, opts["run"]))
        with placement.connected_to_run(cwd, opts["run"]):  # open until the verdict is printed, as for launch
            report = placement.status(cwd, opts["run"], opts["watch"], cfg, tuple(opts.get("only") or ()),
                                      tuple(opts.get("skip") or ()))
            name_config(report, cfg)
            emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level)
    except RunNotFound as exc:
        raise click.UsageError(str(exc)) from None
    return exit_code(report, level)
