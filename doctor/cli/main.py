"""The `dfdoctor` command line: a thin layer over the registry, the runner and the renderers."""

from __future__ import annotations

import gc

# Importing the command line's modules makes some 30,000 objects the collector tracks, all alive until the process
# ends, and it walked them again and again while they were made: half of its 15 ms a start (issue 45). Collection
# waits until they are loaded, and they are frozen then: no later collection walks them either.
_COLLECTING = gc.isenabled()
gc.disable()

import contextlib
import importlib
import os
import sys
import time
from typing import TYPE_CHECKING, Iterator, Optional

import click
from dfdoctor import __version__, ctrl_c
from dfdoctor.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

# Each command's module is imported when the command is named (or listed by --help): what one command runs (the
# engine, the targets, the placements, the run folders) is not every start's (issue 45: `report` and --version
# imported all of it, 0.06 CPU-s of a start here).


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
    """dfdoctor's commands, each loaded only when named (or listed by --help): see the imports above. `launch` and
    `status` share a module."""

    LAZY = {"check": "dfdoctor.cli.check", "report": "dfdoctor.cli.report", "list-checks": "dfdoctor.cli.list_checks",
            "launch": "dfdoctor.cli.launch", "status": "dfdoctor.cli.launch", "stop": "dfdoctor.cli.stop",
            "env": "dfdoctor.cli.env"}
    # the command's function in its module, where it is not the command's name
    ATTRIBUTE = {"check": "check_cmd", "report": "report_cmd", "list-checks": "list_checks", "env": "env_cmd"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.LAZY and name not in self.commands:
            with _loading():
                module = importlib.import_module(self.LAZY[name])  # start-up: see the imports above
            self.add_command(getattr(module, self.ATTRIBUTE.get(name, name)), name)
        return super().get_command(ctx, name)


@click.group(cls=_Commands, context_settings=CONTEXT, invoke_without_command=True, epilog=EPILOG)
@click.version_option(__version__, "-V", "--version", prog_name="dfdoctor")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Why did my training launch produce no log and no process? Checks before and after a launch."""
    if ctx.invoked_subcommand is None:  # a bare `dfdoctor`: what it can do, as `git` or `ruff` would say
        click.echo(ctx.get_help())


def _save_crash(text: str) -> Path:
    """Keep a traceback in a new private file (0600, unpredictable name) in the cache folder, else in the temp
    folder; raises OSError when neither can be written."""
    import tempfile  # a crash's alone (with random and shutil behind it)
    from pathlib import Path

    from dfdoctor.cache import cache_dir, private_dir
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
    from dfdoctor.redact import Redactor
    from dfdoctor.render.github import inert
    from dfdoctor.render.text import visible
    try:
        masked = Redactor.from_env(dict(os.environ)).text(message)
    except Exception:  # masking must not hide the error: say it without what the user typed
        masked = message.split(":", 2)[0] + ": (message not shown: it could not be masked)"
    try:
        click.echo(inert(visible(masked)), err=True)
    except OSError:
        from dfdoctor.engine import discard_stream  # a stderr that cannot be written alone
        discard_stream(sys.stderr)


def _masked_text(text: str) -> str:
    """A text dfdoctor keeps on disk (a crash's traceback), with the secrets of this environment masked."""
    from dfdoctor.redact import Redactor
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
        terminated = _terminated_exit(exc.__cause__)
        if terminated is not None:
            _say("dfdoctor: interrupted (SIGTERM)")
            return terminated
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
            import traceback  # a crash's alone
            where = _save_crash(_masked_text(traceback.format_exc()))
        except OSError:
            where = "(could not be saved)"
        _say(f"dfdoctor: internal error (a bug in dfdoctor): {type(exc).__name__}: {exc}; "
             f"traceback saved to {where}")
        return 3


def _terminated_exit(cause: Optional[BaseException]) -> Optional[int]:
    """The exit code of a command ended by SIGTERM (`dfdoctor.terminate`), when that is what `cause` is; None
    otherwise. A Terminated is raised only by a command that imported dfdoctor.terminate: where none did, the
    cause cannot be one, and the module (run folders and targets behind it) is not imported to tell."""
    terminate = sys.modules.get("dfdoctor.terminate")
    if terminate is not None and isinstance(cause, terminate.Terminated):
        return terminate.EXIT
    return None


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
