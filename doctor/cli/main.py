"""The `dfdoctor` command line: a thin layer over the registry, the runner and the renderers."""

from __future__ import annotations

import gc

# Importing the command line's modules makes some 30,000 objects the collector tracks, all alive until the process
# ends, and it walked them again and again while they were made: half of its 15 ms a start (issue 45). Collection
# waits until they are loaded, and they are frozen then: no later collection walks them either.
_COLLECTING = gc.isenabled()
gc.disable()

import contextlib
import dataclasses
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Optional

import click
from dfdoctor import __version__, ctrl_c
from dfdoctor.cache import cache_dir, private_dir
from dfdoctor.cli.options import (
    examples,
    fleet_options,
    launch_options,
    name_config,
    output_options,
    pass_opts,
    validate_outputs,
)
from dfdoctor.engine import (
    build_context,
    emit,
    environment_facts,
    exit_code,
    discard_stream,
    fail_on,
    guard,
    now_iso,
    verdict_from_checks,
)
from dfdoctor.errors import UsageError
from dfdoctor.fleet_specs import target_specs
from dfdoctor.model import Report, Verdict
from dfdoctor.redact import Redactor
from dfdoctor.render.github import inert
from dfdoctor.render.text import visible
from dfdoctor.registry import discover
from dfdoctor.run.folder import find_run, is_run_dir, runs_root
from dfdoctor.run.masks import load_prints
from dfdoctor.safefile import guard_outputs, read_user_file
from dfdoctor import placements
from dfdoctor.terminate import EXIT as TERMINATED_EXIT, Terminated



@contextlib.contextmanager
def _loading() -> Iterator[None]:
    """Around the import of modules that stay loaded: no collection while they are made, and they are frozen
    afterwards (see _COLLECTING)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


EPILOG = """\b
Examples:
  dfdoctor check --log logs/train.log -- python train.py --lr 3e-4     checks a launch, starts nothing
  dfdoctor launch --log logs/train.log -- python -u train.py           starts it under the flight recorder
  dfdoctor status                                                      later, from any folder: what happened?
  dfdoctor stop                                                        ends every process of the latest run's job

\b
Exit codes: 0 no problem, 1 a problem found, 2 bad usage of dfdoctor, 3 a bug in dfdoctor.
Docs: README.md and docs/ of dfdoctor's repository; `dfdoctor COMMAND -h` for a command's options.
"""


class _Commands(click.Group):
    """dfdoctor's commands, with `launch`, `status`, `stop` and `env` loaded only when named (or listed by --help):
    their modules bring the launch and Slurm pipelines, 0.05 s of CPU in the 0.2 s that `check` took to start
    (round 9)."""

    LAZY = {"launch": "dfdoctor.cli.launch", "status": "dfdoctor.cli.launch", "stop": "dfdoctor.cli.stop",
            "env": "dfdoctor.cli.env"}
    ATTRIBUTE = {"env": "env_cmd"}  # the command's function in its module, where it is not the command's name

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.LAZY and name not in self.commands:
            with _loading():
                module = importlib.import_module(self.LAZY[name])  # start-up: see the class docstring
            self.add_command(getattr(module, self.ATTRIBUTE.get(name, name)), name)
        return super().get_command(ctx, name)


@click.group(cls=_Commands, context_settings=CONTEXT, invoke_without_command=True, epilog=EPILOG)
@click.version_option(__version__, "-V", "--version", prog_name="dfdoctor")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Why did my training launch produce no log and no process? Checks before and after a launch."""
    if ctx.invoked_subcommand is None:  # a bare `dfdoctor`: what it can do, as `git` or `ruff` would say
        click.echo(ctx.get_help())


@main.command("check", context_settings={**CONTEXT, "allow_interspersed_args": False}, epilog=examples("check"))
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


@main.command("list-checks", epilog=examples("list-checks"))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_checks(fmt: str) -> int:
    """Every check: id, title, phase(s), source (built-in or the plugin's distribution)."""
    checks, broken = discover()
    rows = [{"id": c.id, "title": c.title, "phases": list(c.phases), "timeout_s": c.timeout, "source": c.source}
            for c in checks]
    if fmt == "json":
        click.echo(json.dumps({"checks": rows, "broken": [b.__dict__ for b in broken]}, indent=2))
        return 0
    table = [(r["id"], ",".join(r["phases"]), r["source"], r["title"]) for r in rows]
    table += [(b.name, "BROKEN", b.source, b.error) for b in broken]
    table.insert(0, ("ID", "PHASES", "SOURCE", "TITLE"))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    return 0


def _load_saved(spec: Optional[str]) -> tuple[Path, Report, Any]:
    """A saved report (a RESULT.json, a run folder, a run id, or, none given, the latest run), the file it was
    read from, and the launch's secret fingerprints (`redact.SecretPrints`) when it lies in a run folder."""
    path = Path(spec) if spec else None
    if path is None or not path.exists():
        try:
            path = find_run(Path.cwd(), spec)
        except (LookupError, ValueError) as exc:
            raise click.UsageError(str(exc)) from None
    if path.is_dir():
        path = path / "report.json"
    data = read_user_file(path, str(path))
    try:
        doc = json.loads(data.decode("utf-8"))
        return path, Report.from_dict(doc), load_prints(path.parent)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.UsageError(f"{path}: not a readable dfdoctor result ({exc})") from None


@main.command("report", epilog=examples("report"))
@click.argument("source", required=False)
@output_options
@pass_opts
def report_cmd(opts: dict[str, Any]) -> int:
    """Render saved results again (RUN folder, run id or RESULT.json) without re-running anything."""
    pairs = validate_outputs(opts)
    source, report, prints = _load_saved(opts["source"])
    guard(pairs, run_folders=(source.parent,) if is_run_dir(source.parent) else ())
    guard_outputs([o for _, o in pairs if o is not None], [("the report read", source)])
    _say_when_saved(report)
    level = opts.get("fail_on") or "error"
    emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level, prints=prints)
    return exit_code(report, level)


def _say_when_saved(report: Report) -> None:
    """A saved verdict of a job still running is of its time: the job may have ended since (`report` read
    "RUNNING" for a run that had completed). It says so, and which command looks again."""
    v = report.verdict
    if v.state != "running":
        return
    again = f"`dfdoctor status {report.run['id']}`" if report.run.get("id") else "`dfdoctor status`"
    when = f" at {report.finished_at}" if report.finished_at else ""
    # beside the verdict, not in it: the summary is the HTML's H1, and this sentence is about the report
    report.run["as_of"] = f"This is the report saved{when}: {again} looks again."


def _save_crash(text: str) -> Path:
    """Keep a traceback in a new private file (0600, unpredictable name) in the cache folder, else in the temp
    folder; raises OSError when neither can be written."""
    stamp = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-"
    try:
        base = private_dir(cache_dir())
        fd, name = tempfile.mkstemp(prefix=stamp, suffix=".txt", dir=base)
    except OSError:
        fd, name = tempfile.mkstemp(prefix="dfdoctor-" + stamp, suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(name)


def _standard_streams() -> None:
    """Give a closed stdin, stdout or stderr (`>&-`) /dev/null: otherwise the next file we open takes its
    number, and a child's output, or ours, would land in that file."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))


def _say(message: str) -> None:
    """One line on stderr (escaped: it may quote what the user typed, which must not read as a GitHub workflow
    command; masked: what the user typed may hold a password, `--python postgres://u:pw@db/x`); a stderr that
    cannot take it is dropped."""
    try:
        masked = Redactor.from_env(dict(os.environ)).text(message)
    except Exception:  # masking must not hide the error: say it without what the user typed
        masked = message.split(":", 2)[0] + ": (message not shown: it could not be masked)"
    try:
        click.echo(inert(visible(masked)), err=True)
    except OSError:
        discard_stream(sys.stderr)


def _masked_text(text: str) -> str:
    """A text dfdoctor keeps on disk (a crash's traceback), with the secrets of this environment masked."""
    try:
        return Redactor.from_env(dict(os.environ)).text(text)
    except Exception:  # masking must not hide the crash: say the traceback could not be kept safely
        return "(traceback not kept: it could not be masked)\n"


def run(argv: Optional[list[str]] = None) -> int:
    """Run the CLI and map every outcome to the exit codes of docs/interface.md: 0, 1, 2 (usage) or 3 (our bug)."""
    _standard_streams()
    try:
        rv = ctrl_c.command(lambda: main.main(args=argv, prog_name="dfdoctor", standalone_mode=False))
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort as exc:  # click's word for Ctrl-C, or SIGTERM before a job was started
        if isinstance(exc.__cause__, Terminated):
            _say("dfdoctor: interrupted (SIGTERM)")
            return TERMINATED_EXIT
        _say("dfdoctor: interrupted")
        return 130
    except click.UsageError as exc:
        _say(f"dfdoctor: error: {exc.format_message()}")
        return 2
    except UsageError as exc:
        _say(f"dfdoctor: error: {exc}")
        return 2
    except click.ClickException as exc:
        _say(f"dfdoctor: error: {exc.format_message()}")
        return 2
    except KeyboardInterrupt:
        _say("dfdoctor: interrupted")
        return 130
    except Exception as exc:  # our bug: say so, keep the traceback, never a bare stack dump
        if _caused_by_ctrl_c(exc):
            _say("dfdoctor: interrupted")
            return 130
        try:
            where = _save_crash(_masked_text(traceback.format_exc()))
        except OSError:
            where = Path("(could not be saved)")
        _say(f"dfdoctor: internal error (a bug in dfdoctor): {type(exc).__name__}: {exc}; "
             f"traceback saved to {where}")
        return 3


def _caused_by_ctrl_c(exc: BaseException) -> bool:
    """Whether a Ctrl-C is what this exception is made of: Python wraps a KeyboardInterrupt raised in some places
    into another exception (3.11: in a descriptor's __set_name__, as a class body of a lazily imported module
    runs, "RuntimeError: Error calling __set_name__ on 'Field'", seen in a full run), and an exception raised while
    one unwinds carries it as its context. The user pressed Ctrl-C: that is the answer, not a bug of ours."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def entry() -> None:
    """Console-script entry point."""
    code = run()
    # The process ends now: its last garbage collection walked every object of the ~600 modules a launch loads,
    # 0.15 s between the report and the return (issue 45). Frozen, they are not walked; nothing of dfdoctor's
    # waits on that collection (files are closed and processes waited for by the code that opened them).
    gc.freeze()
    # CPython (3.8-3.13): a KeyboardInterrupt raised inside any exec() of a string (dataclasses and namedtuple
    # build their methods so: a Ctrl-C during an import can land there) marks the process as ended by Ctrl-C
    # even once it was answered, and `python -m dfdoctor` then killed itself with SIGINT at exit (-2, not 130).
    # Each exec() of a string clears that mark as it begins.
    exec("")
    sys.exit(ctrl_c.exit_code(code))


gc.freeze()  # the modules imported above (see _COLLECTING)
if _COLLECTING:
    gc.enable()
