"""The options the commands share, and how --format/--output pair up; the work is in `dfdoctor.engine`."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Callable, Optional

import click
from dfdoctor import progress
from dfdoctor.render import EXTENSIONS, FORMATS


def target_spellings() -> str:
    """Every registered kind's spelling, the one that runs here first and marked the default: for --target's help,
    asked by the commands that take a --target (the kinds' registry, and the targets behind it, are theirs, not
    `report`'s)."""
    from dfdoctor.targets import KINDS
    from dfdoctor.targets.registry import kind_for
    return ", ".join(kind_for(s).usage + (" (default)" if kind_for(s).runs_here else "") for s in KINDS)

# Each command's examples, shown under its --help (a command's options alone did not say how they combine).
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "check": (("dfdoctor check --log logs/train.log -- python train.py --lr 3e-4", "checks a launch, starts nothing"),
              ("dfdoctor check --only 'imports.*' --format html --output check.html -- python train.py",
               "one check, an HTML report"),
              ("dfdoctor check --target ssh://me@gpu1 -- python3 /w/train.py", "the checks on another machine"),
              ("dfdoctor check -- sbatch -p gpu job.sbatch", "a Slurm submission, nothing submitted")),
    "launch": (("dfdoctor launch --log logs/train.log -- python -u train.py", "instead of nohup ... &"),
               ("dfdoctor launch -q --watch 0 -- python -u train.py", "one line: verdict, run id, next step"),
               ("dfdoctor launch -- sbatch -p gpu job.sbatch", "submits, watches, says why it pends or failed")),
    "status": (("dfdoctor status", "the latest run of this folder (else yours)"),
               ("dfdoctor status 20260105-101500-ab12", "a run by its id (or a prefix), from any folder"),
               ("dfdoctor status slurm:4242", "any Slurm job, submitted with dfdoctor or not")),
    "report": (("dfdoctor report RUN_ID --format html --output report.html", "a saved run, as HTML"),
               ("dfdoctor report result.json -q", "a saved result's verdict line")),
    "env": (("dfdoctor env", "the block to paste into a bug report"),
            ("dfdoctor env -- .venv/bin/python train.py", "with the interpreter and requirements of that job")),
    "stop": (("dfdoctor stop", "the latest run's job: SIGTERM, 10 s, then SIGKILL to what is left"),
             ("dfdoctor stop 20261205-1130 --grace 30", "a run by its id, 30 s between SIGTERM and SIGKILL"),
             ("dfdoctor stop slurm:12345", "scancel, then wait until Slurm says nothing of it runs")),
    "list-checks": (("dfdoctor list-checks", "id, phases, source and title of every check"),
                    ("dfdoctor list-checks --format json", "the same for a script")),
}


def examples(command: str) -> str:
    """The `Examples:` block of `command`'s --help (click's `\\b` keeps its lines as written)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}\n      # {what}" for line, what in EXAMPLES[command])


def complete_check_ids(ctx: Any, param: Any, incomplete: str) -> list[Any]:
    """`--only <TAB>`, `--skip <TAB>`: the check ids (built-in and plugins') and their families (`cuda.*`)."""
    from click.shell_completion import CompletionItem

    from dfdoctor.registry import discover  # imported on completion only: start-up stays light
    checks, _ = discover()
    ids = sorted({c.id for c in checks} | {c.id.split(".")[0] + ".*" for c in checks})
    titles = {c.id: c.title for c in checks}
    return [CompletionItem(i, help=titles.get(i, "")) for i in ids if i.startswith(incomplete)]


class Seconds(click.ParamType):
    """A finite number of seconds: greater than 0 (`positive`), or 0 or more."""

    name = "seconds"

    def __init__(self, positive: bool) -> None:
        self.positive = positive

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        """The value as float; nan, inf and out-of-range values are a usage error naming the option."""
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0 or (self.positive and seconds == 0):
            self.fail(f"{value!r} is not a number of seconds {'greater than 0' if self.positive else '0 or more'}",
                      param, ctx)
        return seconds


def output_options(f: Callable) -> Callable:
    """--format/--output/--fail-on/-v: how results are written and judged."""
    for deco in reversed([
        click.option("--format", "formats", multiple=True, type=click.Choice(FORMATS),
                     help="Output format; repeatable. Each pairs with the --output whose extension names it, else by "
                          "position; one may go to the terminal (default: text)."),
        click.option("--output", "outputs", multiple=True, type=click.Path(dir_okay=False),
                     help="File to write a --format to; repeatable. A lone --output takes the format its extension "
                          f"names ({', '.join(f'{e} {f}' for e, f in EXTENSIONS.items())})."),
        click.option("--fail-on", type=click.Choice(["error", "warn"]), default=None,
                     help="Which status makes the exit code 1 (default: error = fail, error or timeout)."),
        click.option("-v", "--verbose", is_flag=True, help="Show details, evidence and durations."),
        click.option("-q", "--quiet", is_flag=True,
                     help="On the terminal, one line: the verdict, the run id and the first fix or next step (files "
                          "given with --output are written in full)."),
    ]):
        f = deco(f)
    return f


def launch_options(f: Callable) -> Callable:
    """The options that describe a launch, shared by `check` and `launch`."""
    for deco in reversed([
        click.option("--log", type=click.Path(), help="The log file the user will look at."),
        click.option("--requirements", "requirements", multiple=True, type=click.Path(),
                     help="Requirements file to verify in the training interpreter; repeatable."),
        click.option("--shell-command", help="The exact line the user types to launch (analysed hop by hop)."),
        click.option("--launcher", type=click.Path(), help="A launcher shell script, followed to its Python command."),
        click.option("--require-gpu", is_flag=True, help="A missing or unusable GPU is a failure, not a skip."),
        click.option("--cwd", type=click.Path(), default=None, help="The job's working directory (default: here)."),
        click.option("--python", "python", help="The training interpreter (default: the one COMMAND names)."),
        click.option("--target", "target", multiple=True,
                     help=f"Where the job runs: {target_spellings()}. `check` takes it repeatedly (one row per "
                          "target); `launch` takes one."),
        click.option("--only", multiple=True, shell_complete=complete_check_ids,
                     help="Run only checks whose id matches this glob; repeatable (`dfdoctor list-checks` lists them)."),
        click.option("--skip", multiple=True, shell_complete=complete_check_ids,
                     help="Do not run checks whose id matches this glob; repeatable."),
        click.option("--timeout", type=Seconds(positive=True), default=None,
                     help="Time limit of one check in seconds (default: each check's own)."),
        output_options,
    ]):
        f = deco(f)
    return f


def fleet_options(f: Callable) -> Callable:
    """`check` on many targets: a file of targets and how many are checked at once."""
    from dfdoctor.fleet_specs import DEFAULT_PARALLEL  # `check`'s alone, asked as its options are made
    for deco in reversed([
        click.option("--targets-file", type=click.Path(dir_okay=False),
                     help="A file of targets, one spec per line (# starts a comment); adds to --target."),
        click.option("--parallel", type=click.IntRange(min=1), default=DEFAULT_PARALLEL, show_default=True,
                     help="With several targets: how many are checked at once."),
    ]):
        f = deco(f)
    return f


def single_target(opts: dict[str, Any], command: str) -> str:
    """The one --target of a command that acts on one place (launch): several are a usage error."""
    from dfdoctor.targets import shown_spec
    given = tuple(opts.get("target") or ())
    if len(given) > 1:
        raise click.UsageError(f"{command} takes one --target (got {len(given)}: {', '.join(map(shown_spec, given))}); "
                               f"`dfdoctor check` takes several, then {command} on each")
    return given[0] if given else "local"


def pair_outputs(formats: tuple[str, ...], outputs: tuple[str, ...]) -> list[tuple[str, Optional[str]]]:
    """Pair each --format with an --output (None = the terminal).

    click cannot tell how the two options were interleaved, so an output whose extension names one of the
    requested formats takes that format first; the rest pair by position; a lone --output's format is its
    extension; at most one format is left for the terminal.
    """
    free = list(formats)
    pairs: list[tuple[str, Optional[str]]] = []
    unpaired: list[str] = []
    for out in outputs:
        guess = EXTENSIONS.get(Path(out).suffix.lower())
        if guess in free:
            free.remove(guess)
            pairs.append((guess, out))
        else:
            unpaired.append(out)
    for out in unpaired:
        fmt = free.pop(0) if free else EXTENSIONS.get(Path(out).suffix.lower())
        if fmt is None:
            raise click.UsageError(f"--output {out}: say its --format (cannot tell from the extension)")
        pairs.append((fmt, out))
    pairs.extend((fmt, None) for fmt in free)
    if not pairs:
        pairs.append(("text", None))
    if sum(1 for _, o in pairs if o is None) > 1:
        raise click.UsageError("only one --format can go to the terminal; give the others an --output")
    return pairs


def validate_outputs(opts: dict[str, Any]) -> list[tuple[str, Optional[str]]]:
    """Check --format/--output pairing and that each output's folder exists, before any work is done."""
    pairs = pair_outputs(tuple(opts.get("formats") or ()), tuple(opts.get("outputs") or ()))
    for _, out in pairs:
        if out is not None and not Path(out).resolve().parent.is_dir():
            raise click.UsageError(f"--output {out}: its folder does not exist")
    return pairs

def pass_opts(f: Callable) -> Callable:
    """Collect click's keyword arguments into one dict as the first argument."""
    @functools.wraps(f)
    def wrapper(**kwargs: Any) -> Any:
        progress.quiet = bool(kwargs.get("quiet"))  # -q: no progress line either
        return f(kwargs)
    return wrapper


def name_config(report: Any, cfg: Any) -> None:
    """The report says which config file it used (found from --cwd up to the project's root), when one was, and
    which it passed by without reading (another user's file: `config.load`), with why."""
    if getattr(cfg, "path", None) is not None:
        report.environment["config"] = str(cfg.path)
    if getattr(cfg, "skipped", None):
        report.environment["config_skipped"] = list(cfg.skipped)
