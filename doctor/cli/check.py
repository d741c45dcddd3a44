"""`dfdoctor check`: the pre-launch checks of a launch line, on this machine, a --target or many; no job starts.
Loaded only when named (cli/main.py): the engine, the placements and the targets are this command's, not every
start's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click
from dfdoctor import __version__, placements
from dfdoctor.cli.options import (
    examples,
    fleet_options,
    launch_options,
    name_config,
    pass_opts,
    validate_outputs,
)
from dfdoctor.engine import build_context, emit, environment_facts, exit_code, fail_on, guard, now_iso, \
    verdict_from_checks
from dfdoctor.fleet_specs import target_specs
from dfdoctor.model import Report, Verdict
from dfdoctor.run.folder import runs_root
from dfdoctor.safefile import guard_outputs

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@click.command("check", context_settings={**CONTEXT, "allow_interspersed_args": False}, epilog=examples("check"))
@launch_options
@fleet_options
@placements.check_options  # a placement's own ways to check (Slurm: --slurm-nodes)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_opts
def check_cmd(opts: dict[str, Any]) -> int:
    """Pre-launch checks for the launch of COMMAND; no job is started."""
    started = now_iso()
    pairs = validate_outputs(opts)
    command = list(opts["command"])
    if opts.get("targets_file"):  # read before the checks, written over by an --output naming it: refused first
        guard_outputs([o for _, o in pairs if o is not None], [("--targets-file", Path(opts["targets_file"]))])
    specs = target_specs(tuple(opts.get("target") or ()), opts.get("targets_file"))
    if len(specs) > 1 or opts.get("targets_file"):
        from dfdoctor.fleet import check_many  # start-up: several targets' alone (fleet_specs.py)
        report, level, env = check_many(opts, command, specs, started, __version__, pairs)
        emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level, env=env)
        return exit_code(report, level)
    instead = placements.check_instead(opts, command, started)  # `check --slurm-nodes`: a row per node
    if instead is not None:
        report, level = instead
        emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level)
        return exit_code(report, level)
    opts["target"] = specs[0]
    opts["target"], command = placements.through_target(opts["target"], command)  # ray://HEAD: Ray's own line
    ctx, cfg = build_context(opts, command)
    guard(pairs, ctx, (runs_root(ctx.cwd),))
    # this machine, a --target, or a scheduler's line (sbatch, ray job submit): each has its own checks
    placement = placements.of_line(ctx)
    records = placement.check(ctx, tuple(opts.get("only") or ()), tuple(opts.get("skip") or ()), cfg)
    if ctx.log is not None:  # a --log this placement never opens (Slurm, Ray): a warning, where the output goes
        from dfdoctor.unused_log import records as unused_log  # start-up: only where a --log is given
        records = unused_log(placement, ctx, tuple(opts.get("skip") or ())) + records
    level = fail_on(opts, cfg)
    report = Report(tool_version=__version__, target=placement.report_target(ctx), command=command, started_at=started,
                    finished_at=now_iso(), verdict=verdict_from_checks(records, level), checks=records,
                    timeline=[], environment=environment_facts(ctx, records), mode="check",
                    command_as_typed=ctx.typed_line or "")
    if not command and not ctx.shell_command and not ctx.launcher:  # a line or a launcher is a launch to check
        report.verdict = no_launch_checked(report.verdict, records)
    name_config(report, cfg)
    emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level, env=ctx.env)
    return exit_code(report, level)


def no_launch_checked(verdict: Verdict, records: list) -> Verdict:
    """`check` without a command: its verdict says plainly that only the environment was looked at, so an OK
    over checks that all skipped for want of a command is not read as a launch that will work."""
    ran = sum(1 for r in records if r.status.value != "skip")
    said = f"No command given: the environment was checked ({ran} of {len(records)} checks ran), no launch was."
    rest = verdict.summary if verdict.state.value != "ok" else ""  # "found no problem that blocks the launch": none
    return dataclasses.replace(verdict, summary=f"{said} {rest}".strip(),
                               fix=verdict.fix or ("to check a launch, give its command after --: "
                                                   "dfdoctor check -- python train.py"))

