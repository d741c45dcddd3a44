"""`dfdoctor stop [RUN]`: end every process of a run's job; print what was stopped, what was already gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from dfdoctor.cli.options import Seconds, examples, pass_opts
from dfdoctor.render.text import visible
from dfdoctor.run.folder import RunNotFound
from dfdoctor.placing_answers import Stopped
from dfdoctor.stop import GRACE_S, stop_run

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

# The exit codes after the examples: stop is the one command whose codes a script must tell apart.
EPILOG = examples("stop") + """

\b
Exit codes: 0 nothing of the job is left, 1 something of it survived (named), 2 bad usage, 3 a bug in dfdoctor.
"""


@click.command("stop", context_settings=CONTEXT, epilog=EPILOG)
@click.argument("run", required=False)
@click.option("--cwd", type=click.Path(file_okay=False), default=None,
              help="Where the runs are (.dfdoctor/runs under it; default: here).")
@click.option("--grace", type=Seconds(positive=False), default=GRACE_S, show_default=True,
              help="Seconds between SIGTERM and SIGKILL (a Slurm job: Slurm's own KillWait, waited for on top).")
@click.option("-q", "--quiet", is_flag=True,
              help="One line: the run and the outcome (what survived, when something did).")
@pass_opts
def stop(opts: dict[str, Any]) -> int:
    """End every process of RUN's job, here, on its --target, or in Slurm: torchrun's ranks in their own sessions
    and what a launcher backgrounded included. Only processes proven to be the job's are signalled. RUN: a run id
    (or its start), a run folder, slurm:JOBID or ray:JOB_ID; none: the latest run launched from --cwd (never one
    launched elsewhere), named in the first line."""
    cwd = Path(opts["cwd"] or ".").resolve()
    try:
        done = stop_run(cwd, opts["run"], opts["grace"])
    except RunNotFound as exc:
        raise click.UsageError(str(exc)) from None
    said = lines(done, opts["grace"])
    if opts.get("quiet"):  # the run, then the outcome: the last line
        said = [f"{said[0]}: {said[-1]}"] if len(said) > 1 else said
    for line in said:
        click.echo(visible(line))  # a command line may hold terminal escapes: they are shown, never obeyed
    return 0 if done.clean else 1


def lines(done: Stopped, grace_s: float) -> list[str]:
    """What the stop did, a line per process, and the outcome last."""
    where = f" {done.where}" if done.where else ""
    out = [f"dfdoctor stop: run {done.run}{where}" + (f" ({done.chosen})" if done.chosen else "")]
    if done.placed is not None:  # what the scheduler did, in its words (dfdoctor.placing_answers.Ended)
        out += done.placed.lines()
    for p in done.stopped:
        how = {"SIGTERM": "SIGTERM", "SIGKILL": f"SIGKILL, still there {grace_s:g} s after SIGTERM"}.get(
            p.get("signal") or "", "it ended with the job before its signal")
        out.append(f"stopped pid {p['pid']} ({how}): {p.get('cmdline') or '?'}")
    for p in done.gone:
        out.append(f"already gone: pid {p['pid']}" + (f": {p['cmdline']}" if p.get("cmdline") else ""))
    for p in done.unproven:
        out.append(f"left alone: pid {p['pid']} is named in the run folder but nothing proves it is this job's "
                   f"(not the run's marker in its environment, not under its recorder): {p.get('cmdline') or '?'}")
    for e in done.errors:
        out.append(f"could not signal pid {e['pid']}: {e['error']}: {e.get('cmdline') or '?'}")
    if done.recorder in ("SIGTERM", "SIGKILL"):
        out.append(f"the run's recorder did not exit by itself once its job was gone: ended with {done.recorder}")
    if done.error:
        out.append(f"NOT stopped: {done.error}")
    elif not done.clean:
        left = [f"pid {p['pid']} ({p.get('cmdline') or '?'})" for p in done.survived]
        if done.recorder == "survived":
            left.append("the run's recorder")
        if done.placed is not None and done.placed.left:
            left.append(done.placed.left_words())
        after = "SIGKILL" if done.survived or done.recorder == "survived" else "the stop"  # a scheduler's: no kill
        out.append(f"STILL RUNNING after {after}: " + ", ".join(left))
    elif not done.stopped and done.placed is None:
        out.append("nothing of the job was running")
    else:
        out.append("nothing of the job is left")
    return out
