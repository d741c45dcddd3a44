"""The check pipeline: build the context, choose the checks, run a phase, reduce the records to one verdict,
mask, emit, and the exit code. The CLI calls it; bad input raises `UsageError` (exit 2)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from dfdoctor import causes
from dfdoctor.errors import UsageError
from dfdoctor.hostos import platform_name
from dfdoctor.model import PROBLEMS, CheckRecord, Report, Status, Verdict
from dfdoctor.progress import Progress
from dfdoctor.redact import Redactor
from dfdoctor.registry import Check, discover, select, unmatched
from dfdoctor.render import render
from dfdoctor.render.github import SUMMARY_LIMIT, inert, summary
from dfdoctor.render.text import color_wanted, verdict_line, visible
from dfdoctor.render.undecodable import shown_all
from dfdoctor.run.folder import runs_root
from dfdoctor.safefile import guard_outputs, one_of, open_summary, regular_file_problem, write_atomically
from dfdoctor.lazy_re import compile_later

# The config, the context and the targets (every kind, subprocess behind them), shutil and shlex are imported where
# a command builds a context, reads a line or reaches a target: `report` writes a saved result through `emit` and
# needs none of them (issue 45).
if TYPE_CHECKING:
    from dfdoctor.config import Config
    from dfdoctor.context import Context
    from dfdoctor.targets import Target


def now_iso() -> str:
    """The current time as ISO-8601 with the UTC offset."""
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _resolve_python(spec: str, cwd: Path) -> Optional[str]:
    if os.sep in spec:
        p = Path(spec) if Path(spec).is_absolute() else cwd / spec
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    import shutil  # see the imports
    return shutil.which(spec)


def default_python(command: list[str], cwd: Path, launcher: Optional[Path] = None,
                   env: Optional[dict[str, str]] = None) -> str:
    """The interpreter COMMAND (or else the --launcher) names, through torchrun and launchers; else python3."""
    try:
        # launchline (the command-line reader: 8 modules) is imported only when a command is read: at the top it
        # costs every start-up ~60 ms CPU, 0.42 -> 0.48 s for `import dfdoctor.cli.main` (+15 %, --help, status
        # and report included; docs/notes/round-6/run.md)
        from dfdoctor.launchline.commandline import parse, parse_launcher
        if command:
            named = parse(command, cwd, env).python
        elif launcher is not None:
            named = parse_launcher(launcher, cwd, (), env).python
        else:
            named = None
    except Exception:  # a command we cannot parse still gets checked with the default interpreter
        named = None
    import shutil  # see the imports
    return named or shutil.which("python3") or sys.executable


def _named_python(command: list[str]) -> Optional[str]:
    """The interpreter word a command names, unresolved (for a target, where this machine's PATH means nothing)."""
    try:
        from dfdoctor.launchline.commandline import parse  # start-up: see default_python
        spec = parse(command, Path("/")) if command else None
    except Exception:
        return None
    if spec is None or spec.runner != "python" or not command:
        return None
    word = next((w for w in command if Path(w).name.startswith("python")), None)
    return word


def build_context(opts: dict[str, Any], command: list[str]) -> tuple[Context, Config]:
    """Turn CLI options and config into a Context; bad input raises UsageError (exit 2)."""
    given = target_option(opts.get("target"))
    typed = _typed_line(opts, command, given)
    if typed is not None:
        command = typed.command
    target = typed.target if typed is not None and given.runs_here else given
    remote = not target.runs_here
    # On a remote target --cwd, --python and the log are paths THERE: nothing about them is checked here.
    cwd_note = ""
    if remote and not opts.get("cwd"):
        cwd, cwd_note = remote_cwd(command, target)
    else:
        cwd = Path(opts.get("cwd") or os.getcwd())
    cwd = cwd if remote else cwd.resolve()
    if not remote and not cwd.is_dir():
        raise UsageError(f"--cwd {opts.get('cwd')}: no such directory")
    from dfdoctor.config import ConfigError, load  # see the imports
    try:
        cfg = load(Path.cwd() if remote else cwd)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if opts.get("python"):
        python = opts["python"] if remote else _resolve_python(opts["python"], cwd)
        if python is None:
            raise UsageError(f"--python {opts['python']}: no such executable interpreter")
    elif remote:
        python = _named_python(command) or "python3"
    else:
        launcher_path = (cwd / opts["launcher"]) if opts.get("launcher") else None
        python = default_python(command, cwd, launcher_path if launcher_path and launcher_path.is_file() else None)
    reqs = []
    for r in opts.get("requirements") or ():
        p = Path(r) if Path(r).is_absolute() else cwd / r
        problem = None if remote else regular_file_problem(p)
        if problem:
            raise UsageError(f"--requirements {r}: {problem}")
        reqs.append(p)
    launcher = opts.get("launcher")
    problem = regular_file_problem(cwd / launcher) if launcher and not remote else None
    if problem:
        raise UsageError(f"--launcher {launcher}: {problem}")
    timeout = opts.get("timeout")
    if timeout is None and cfg.get("timeout") is not None:
        timeout = float(cfg.get("timeout"))
    from dfdoctor.context import Context  # see the imports
    ctx = Context(command=list(command), cwd=cwd, python=python, python_given=bool(opts.get("python")),
                  log=(cwd / opts["log"]) if opts.get("log") else None,
                  no_redirect=bool(opts.get("no_redirect")), requirements=reqs,
                  shell_command=opts.get("shell_command"),
                  launcher=(cwd / launcher) if launcher else None, require_gpu=bool(opts.get("require_gpu")),
                  target=target, timeout=timeout, config=cfg.values)
    ctx.cwd_note = cwd_note
    ctx.launching, ctx.strategy = bool(opts.get("launching")), opts.get("strategy") or "auto"
    ctx.only = tuple(opts.get("only") or ()) or tuple(cfg.get("only") or ())
    submitted = env_before_sbatch(ctx.command)
    if submitted is not None:  # `env SBATCH_PARTITION=x sbatch job.sbatch`: a Slurm submission, with that env
        ctx.command, assigned = submitted
        ctx.env = {**ctx.env, **assigned}
    if typed is not None:
        ctx.typed_line = typed.line
    return ctx, cfg


def target_option(spec: Optional[str]) -> Target:
    """`--target SPEC` parsed (none: this machine): the one Target a command's context carries. A malformed spec
    is bad usage: one line, exit 2."""
    from dfdoctor.targets import parse_target, shown_spec  # see the imports
    try:
        return parse_target(spec)
    except ValueError as exc:
        raise UsageError(f"--target {shown_spec(spec or '')}: {exc}") from None


def env_before_sbatch(command: list[str]) -> Optional[tuple[list[str], dict[str, str]]]:
    """`env [VAR=V...] sbatch ...` (or `VAR=V sbatch ...`): the sbatch command and the variables it is given, read
    through the wrapper table (launchline/wrappers.py); None for anything else (an `env -i`, `-u`, `-C`: not a
    plain environment to add)."""
    from dfdoctor.launchline.wrappers import name_of, read_through  # start-up: see default_python
    words, assigned = list(command), {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        k, v = words.pop(0).split("=", 1)
        assigned[k] = v
    through = read_through(words)
    if through.unknown or any(name != "env" or any(w != "env" and "=" not in w for w in ws[1:])
                              for name, ws, _ in through.wrappers):
        return None
    rest = words[through.index:]
    if not (assigned or through.wrappers) or not rest or name_of(rest[0]) != "sbatch":
        return None
    return rest, {**assigned, **through.env}


def _typed_line(opts: dict[str, Any], command: list[str], given: Target):
    """A launch line given after `--` (ssh, pct exec, docker exec, nohup, tmux, sh -c ...): its hops give the
    target (unless `given`, the --target, is another machine), its innermost Python command is the job, its
    redirect the log and its `cd` the cwd, unless the options say otherwise. `check` rehearses the line itself
    too; `launch` replaces it (opts["launching"])."""
    from dfdoctor.launchline import typed as typed_lines  # start-up: see default_python
    if opts.get("shell_command") or not typed_lines.is_launch_line(command):
        return None
    try:
        t = typed_lines.read(command)
    except ValueError as exc:  # its hops name a target that is no target (`ssh -p 0 h ...`)
        raise UsageError(f"the launch line's target: {exc}") from None
    if t is None:
        return None
    if opts.get("launching") and t.target.runs_here:
        # a line that stays on this machine (`sh -c`, `nohup`, a pipe, `exec > log`) is launched as typed: the
        # recorder watches it and what it hands off, so its own plumbing is judged as it really runs
        return None
    if not opts.get("log") and t.log:
        opts["log"] = t.log
    if not opts.get("cwd") and t.cwd:
        opts["cwd"] = t.cwd
    if not opts.get("launching"):
        opts["shell_command"] = t.line
    return t


def remote_cwd(command: list[str], target: Target) -> tuple[Path, str]:
    """The job's folder on a target when no --cwd is given: never this machine's. The folder of an absolute
    script path, else where a session there starts (the target user's home); and which, in words."""
    script = next((w for w in command[1:] if w.endswith(".py") and w.startswith("/")), None)
    if script:
        folder = os.path.dirname(script)
        return Path(folder), f"{folder}, the folder of the script (no --cwd given)"
    return Path("."), f"the home folder of the target's user (no --cwd given; your local folder means nothing on {target})"


def users_files(ctx: Context) -> list[tuple[str, Path]]:
    """The files the user named for the launch itself (--log, --launcher, --requirements, every word of the
    command that names a file here: the script, the interpreter, a config): an --output must never be one."""
    if not ctx.target.runs_here:
        return []  # paths there; an --output is a path here
    files = [("--log", ctx.log)] if ctx.log else []
    files += [("--launcher", ctx.launcher)] if ctx.launcher else []
    files += [("--requirements", r) for r in ctx.requirements]
    # what dfdoctor reads from --cwd without being told: the default requirements and its config
    files += [(name, ctx.cwd / name) for name in ("requirements.txt", "pyproject.toml", "dfdoctor.toml")
              if _is_file(ctx.cwd / name)]
    # a word holding a shell line (`bash -c 'python t.py >> train.log'`), and --shell-command, name files too
    lines = [w for w in ctx.command if any(c in w for c in SHELL_CHARS)] + [ctx.shell_command or ""]
    for word in ctx.command + [w for line in lines for w in _line_words(line)]:
        for part in (word, word.partition("=")[2]):  # `--config=cfg.yaml` names a file too
            p = ctx.cwd / part if part else None
            if p is not None and _is_file(p):
                files.append((f"the command's {part}", p))
    return files


SHELL_CHARS = " \t\n<>|;&"


def _is_file(p: Path) -> bool:
    """Whether `p` is a regular file here; a path that may not be looked at (`/proc/1/fd/1` of a line aimed at a
    container's log, not ours to stat) is none of the user's files here, never a crash."""
    try:
        return p.is_file()
    except OSError:
        return False


def _line_words(line: Optional[str], depth: int = 0) -> list[str]:
    """The words of a shell line (a typed line, --shell-command), its redirections' files split off their
    operators (`>>train.log`: `train.log`), and those of a line inside it (`bash -c '... 2>> err.log'`): what may
    name a file the line writes or reads. Unbalanced quotes: its blank-separated words."""
    if not line or depth > 3:
        return []
    import shlex  # see the imports
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        words = line.split()
    return words + [w for word in words if any(c in word for c in SHELL_CHARS)
                    for w in _line_words(word, depth + 1)]


# The files the user named for this run's launch (users_files), kept by `guard` for the step summary: GitHub's
# $GITHUB_STEP_SUMMARY pointed at one of them must not be appended to (append_step_summary).
_NAMED: list[tuple[str, Path]] = []


def guard(pairs: list[tuple[str, Optional[str]]], ctx: Optional[Context] = None,
          run_folders: tuple[Path, ...] = ()) -> None:
    """Exit 2 before any work when an --output would overwrite a file the user named, or land in a run
    folder (see `dfdoctor.safefile.guard_outputs`)."""
    _guard(pairs, users_files(ctx) if ctx else [], run_folders)


def guard_many(pairs: list[tuple[str, Optional[str]]], contexts: list[Context]) -> None:
    """`guard` for `check` on several targets: an --output may overwrite none of the files any of their lines
    names, nor land in a run folder of any of them."""
    _guard(pairs, [n for ctx in contexts for n in users_files(ctx)], tuple(runs_root(c.cwd) for c in contexts))


def _guard(pairs: list[tuple[str, Optional[str]]], named: list[tuple[str, Path]],
           run_folders: tuple[Path, ...]) -> None:
    _NAMED[:] = named
    guard_outputs([o for _, o in pairs if o is not None], named, [("a run folder", d) for d in run_folders])


def named_in_report(report: Report) -> list[tuple[str, Path]]:
    """The files a report names as the user's: the run's log, and the command's words that name a file in the
    job's folder on this machine (its script, a config)."""
    out: list[tuple[str, Path]] = []
    log = (report.run or {}).get("log")
    if log and not (report.run or {}).get("remote_dir"):
        out.append(("the job's log", Path(log)))
    cwd = (report.environment or {}).get("cwd")
    from dfdoctor.targets import parse_target  # see the imports
    try:
        here = parse_target(report.target or "local").runs_here
    except ValueError:
        here = False
    if here and cwd and os.path.isabs(cwd):
        lines = [w for w in report.command if any(c in w for c in SHELL_CHARS)]
        for word in list(report.command) + [w for line in lines for w in _line_words(line)]:
            for part in (word, word.partition("=")[2]):
                if part and os.path.isfile(os.path.join(cwd, part)):
                    out.append((f"the command's {part}", Path(cwd) / part))
    return out


@contextlib.contextmanager
def target_connection(ctx: Context) -> Iterator[None]:
    """Share one ssh connection among every check of this run (the checks' forked workers inherit it)."""
    if ctx.target.runs_here:
        yield
        return
    from dfdoctor.targets import transport  # see the imports
    with transport.connected(ctx.target):
        yield  # a connection that fails is reported by target.reachable and each probe, in ssh's words


@contextlib.contextmanager
def target_connection_meanwhile(ctx: Context) -> Iterator[Callable[[], None]]:
    """`target_connection`, whose ssh login runs beside the block's first steps that need no target (choosing the
    checks): the block calls the `ready` it is given before its first step that goes there. The login is done
    (or failed) before `ready` returns, so no thread runs when the checks' workers are forked."""
    stack = contextlib.ExitStack()
    opened = threading.Thread(target=stack.enter_context, args=(target_connection(ctx),), daemon=True)
    with stack:
        opened.start()
        try:
            yield opened.join
        finally:
            opened.join()


def fail_on(opts: dict[str, Any], cfg: Config) -> str:
    """`--fail-on`, else the config's `fail-on`, else error."""
    return opts.get("fail_on") or cfg.get("fail-on") or "error"


def _globs(opts: dict[str, Any], cfg: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """--only/--skip from the command line and the config."""
    only = tuple(opts.get("only") or ()) or tuple(cfg.get("only") or ())
    return only, tuple(opts.get("skip") or ()) + tuple(cfg.get("skip") or ())


def check_selection(opts: dict[str, Any], cfg: Config,
                    checks: Optional[list[Check]] = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """--only/--skip from the command line and the config; an --only that matches nothing is bad usage (the
    checks are loaded only to tell that: with no --only, nothing is imported; with one, only the built-in checks
    it matches, and every check to list them where it matches none)."""
    only, skip_ = _globs(opts, cfg)
    if not only:
        return only, skip_
    checks = discover(only=only)[0] if checks is None else checks
    missing = list(unmatched(only, checks))
    if missing:
        ids = ", ".join(c.id for c in discover()[0])
        raise UsageError(f"--only {', '.join(missing)} matches no check (checks: {ids})")
    return only, skip_


def choose_checks(opts: dict[str, Any], cfg: Config, phase: Optional[str]) -> tuple[list[Check], list[CheckRecord]]:
    """The checks to run, plus error records for plugins that failed to load. Only the built-in checks that can be
    chosen are imported: those an --only matches, else those of scope "any" no --skip names (an --only is told
    against every check it matches, a skipped one too: `--only 'cuda.*' --skip cuda.nccl` is no bad usage)."""
    only, skip_ = _globs(opts, cfg)
    # with an --only, the built-in checks it matches (of any scope: `--only slurm.gpus` is no bad usage here)
    checks, broken = discover(only=only) if only else discover(skip=skip_, scope="any")
    check_selection(opts, cfg, checks)
    return select(checks, only, skip_, phase), broken_plugin_records(broken, phase or "pre")


def broken_plugin_records(broken: list, phase: str) -> list[CheckRecord]:
    """One `error` record per check plugin that could not be loaded: a check the user expects did not run."""
    return [CheckRecord(id=f"plugin.{b.name}", phase=phase, status=Status.ERROR,
                        summary=f"check plugin {b.name} from {b.source} could not be loaded: {b.error}",
                        fix=f"Reinstall or remove the distribution {b.source}.", title="plugin load")
            for b in broken]


def run_phase(ctx: Context, checks: list[Check], phase: str, cfg: Config,
              jobs: Optional[int] = None) -> list[CheckRecord]:
    """Run one phase's checks (at most `jobs` at once; default all) with a live progress line on a terminal,
    then apply silences."""
    # start-up: the runner and the probe server (psutil with them) are imported by a command that runs checks, not
    # by every command that imports the engine (`report`, `stop`, `--version`: 0.01 CPU-s of each)
    from dfdoctor import probe_server
    from dfdoctor.runner import run_checks
    progress = Progress(len(checks))
    try:
        with probe_server.serving(ctx, wanted=any(c.imports_torch for c in checks),
                                  job_imports=any(c.id == probe_server.JOB_IMPORTS for c in checks)):
            records = run_checks(checks, ctx, phase, progress=progress, jobs=jobs)
    finally:
        progress.close()
    return finished(records, cfg)


def finished(records: list[CheckRecord], cfg: Config) -> list[CheckRecord]:
    """A phase's records as reported: silences applied, then one finding for an unreachable target and one for an
    interpreter that cannot start (each over every record of the phase: it rewrites the others in place)."""
    from dfdoctor import root_causes  # start-up: see run_phase
    from dfdoctor.config import apply_silences  # see the imports
    apply_silences(records, cfg.silences)
    return root_causes.one_missing_module(root_causes.one_missing_interpreter(one_unreachable_target(records)))


def one_unreachable_target(records: list[CheckRecord]) -> list[CheckRecord]:
    """A target that cannot be reached is one finding, not one per check: when `target.reachable` says so,
    the checks that could not get there become `skip`s pointing at it (run alone, each keeps its error)."""
    if not any(r.id == "target.reachable" and r.cause == causes.TARGET_UNREACHABLE for r in records):
        return records
    for r in records:
        if r.id != "target.reachable" and r.cause == causes.TARGET_UNREACHABLE and r.status == Status.ERROR:
            r.status, r.cause, r.fix = Status.SKIP, None, ""
            r.summary = "not examined: the target could not be reached (see target.reachable)"
    return records


def counts_as_problem(rec: CheckRecord, fail_on_level: str) -> bool:
    """Whether this record makes the exit code 1 under `--fail-on`."""
    if rec.silenced:
        return False
    return rec.status in PROBLEMS or (fail_on_level == "warn" and rec.status == Status.WARN)


# Checks that try the job's own start in its interpreter (its imports, with its cwd, environment and sys.path):
# an import they saw fail, whatever it raised (an ImportError of the project's code, a KeyError of module-level
# code), is raised by the job at the same line before it writes a log, as a missing module is (issue 43). An
# import that only did not finish within the probe's time (import-hang) is not seen to fail: it does not block.
STARTS_TRIED = frozenset({"imports.smoke"})


def launch_blockers(records: list[CheckRecord]) -> list[CheckRecord]:
    """The findings after which a launch cannot produce a log: a problem (not silenced) whose cause is one of
    `causes.LAUNCH_BLOCKERS`, or an import of the job seen to fail (STARTS_TRIED), and that rests on an
    observation (a static reading only ever warns, see model.Result). `launch` and a Slurm submission stop on
    the first unless --force."""
    return [r for r in records if (r.cause in causes.LAUNCH_BLOCKERS and r.status in PROBLEMS or _start_failed(r))
            and r.observed and not r.silenced]


def _start_failed(r: CheckRecord) -> bool:
    """An import of the job's start tried in its interpreter and seen to fail (not merely to take too long)."""
    return r.id in STARTS_TRIED and r.status == Status.FAIL and r.cause != causes.IMPORT_HANG


def never_forced(r: CheckRecord) -> bool:
    """A blocker that --force does not pass: the log is a file the user named for another purpose (the job's own
    script), and dfdoctor never appends a job's output to it (checks/log_writable.py)."""
    return bool(r.data.get("log_is_input"))


def not_started(blockers: list[CheckRecord], *, not_done: str, subject: str, force: str) -> Verdict:
    """The verdict of a start refused because of `blockers`: the first one's cause and fix, all of them listed."""
    b = blockers[0]
    summary = f"{not_done}: {b.id} found that {subject} cannot work: {b.summary}"
    # said once: the first blocker's summary is the headline, and evidence it already quotes is left out
    # (an unreachable host's "Could not resolve hostname" was printed four times)
    said = " ".join(summary.split())
    evidence = [f"{r.id}: {r.summary}" for r in blockers[1:]] + \
        [e for e in b.evidence if " ".join(e.split()) not in said]
    offer = [] if any(r.cause in causes.NOTHING_CAN_START or never_forced(r) for r in blockers) else [force]
    return Verdict("failed", b.cause, summary, b.fix, evidence + offer)


def not_rehearsed(warns: list[CheckRecord]) -> str:
    """What launch.path could not rehearse of the user's launch line, in a sentence ("" when it rehearsed all of
    it, or was not asked to): the whole line, or the parts of it that did not run."""
    for r in warns:
        what = r.data.get("not_rehearsed") if r.id == "launch.path" else None
        if what:
            whole = (r.data.get("rehearsal") or {}).get("line") is None
            return f"Your launch line was not rehearsed ({what}): it was read, not run" if whole else \
                f"Part of your launch line was not rehearsed ({what}), so the whole line was not seen to work"
    return ""


def verdict_from_checks(records: list[CheckRecord], fail_on_level: str) -> Verdict:
    """`check`'s verdict: ok, or failed with the worst finding's cause, summary and fix."""
    problems = [r for r in records if counts_as_problem(r, fail_on_level)]
    if not problems:
        warns = [r for r in records if r.status == Status.WARN and not r.silenced]
        # counted as the report lists them: a check's findings each on a line of their own (3 lines, "1 warning")
        said = sum(max(1, sum(1 for f in r.findings if f.status == Status.WARN)) for r in warns)
        note = f"; {said} warning(s)" if warns else ""
        ran = sum(1 for r in records if r.status != Status.SKIP)  # a skipped check found nothing: not "no problem"
        skipped = f" ({len(records) - ran} skipped)" if ran < len(records) else ""
        found = f"{ran} check(s) found no problem that blocks the launch{skipped}{note}."
        untried = not_rehearsed(warns)
        if untried:  # what was not run is never a pass: not OK, though nothing was found (exit 0 all the same)
            return Verdict("unknown", None, f"{untried}. {found}",
                           evidence=[f"{r.id}: {r.summary}" for r in warns])
        return Verdict("ok", None, found, evidence=[f"{r.id}: {r.summary}" for r in warns])
    blockers = launch_blockers(problems)  # a warning never blocks, though --fail-on warn counts it
    # launch.path's rehearsal of the user's own line, when it failed, is the most direct answer: it leads. A
    # finding (a failure, or under --fail-on warn a warning) leads over a check that could not look: the
    # headline names what was found, in the order the report lists it
    first = max(blockers or problems, key=lambda r: (r.status in (Status.FAIL,), r.status == Status.WARN,
                                                     r.status.rank, r.id == "launch.path" and r.observed))
    evidence = [f"{r.id} ({r.status.value}): {r.summary}" for r in problems]
    if all(r.status in (Status.ERROR, Status.TIMEOUT) for r in problems):
        # Checks that could not look found nothing wrong with the launch: not known to work, not known to fail.
        return Verdict("unknown", first.cause, f"{len(problems)} of {len(records)} check(s) could not look, and "
                       f"none found a problem; first: {first.id}: {first.summary}", first.fix, evidence)
    # The headline is what happened, in the words of the check that saw it; the fix line says what to do.
    others = len(problems) - 1
    said = headline(first.summary)
    return Verdict("failed", first.cause,
                   f"{said} ({first.id}" + (f"; {others} more problem(s) below)" if others else ")"),
                   first.fix, evidence)


# Commands a check's words may begin with, spelled as typed: "sbatch refuses ...", never "Sbatch refuses ..."
COMMANDS = frozenset({"sbatch", "srun", "salloc", "scontrol", "sacct", "torchrun", "accelerate", "deepspeed",
                      "python", "python3", "pip", "ssh", "pct", "lxc-attach", "docker", "kubectl", "nohup",
                      "setsid", "tmux", "screen", "nvidia-smi", "py-spy"})


# "datasets is not installed in ...", "numpy 2.4.6 is installed, but ...": a distribution's name, spelled as pip does
_PACKAGE_FIRST = compile_later(r"^[\w.-]+ (?:[\w.+!-]+ )?is (?:not )?installed\b")


def headline(summary: str) -> str:
    """A check's summary as the verdict's first sentence: its first letter capitalised, unless its first word is
    a command, a path or a file name (`sbatch`, `/opt/venv/bin/python`, `train.py`), which keeps its spelling."""
    word = summary.split(" ", 1)[0].strip("`'\":,;")
    if word in COMMANDS or "/" in word or "." in word.rstrip(".") or _PACKAGE_FIRST.match(summary):
        return summary
    return summary[:1].upper() + summary[1:]


def environment_facts(ctx: Optional[Context], records: list[CheckRecord]) -> dict[str, Any]:
    """Host and interpreter facts for the report, plus what checks learned (their data["environment"])."""
    import socket  # start-up: 14 M instructions that `report` and `status` of a saved result never use
    env: dict[str, Any] = {"host": socket.gethostname(), "os": platform_name(),
                           "dfdoctor_python": sys.version.split()[0]}
    if os.environ.get("SLURMD_NODENAME"):  # a Slurm node's name need not be its host's (several on one host)
        env["slurm_node"] = os.environ["SLURMD_NODENAME"]
    if ctx is not None:
        env.update({"training_python": ctx.python, "cwd": ctx.cwd_note or str(ctx.cwd),
                    "target": str(ctx.target)})
    for r in records:
        extra = r.data.get("environment")
        if isinstance(extra, dict):
            env.update(extra)
    return env


def redacted(report: Report, env: Optional[dict[str, str]] = None, prints: Any = None) -> Report:
    """The report with secrets masked (every format goes through this): those of `env` (default: ours), of the
    command, and those `prints` (a run's `redact.SecretPrints`) recognise; bytes that were not UTF-8 shown as
    `\\xNN`."""
    return shown_all(Redactor.from_env(dict(os.environ if env is None else env)).report(report, prints))


class OutputNotWritten(UsageError):
    """An --output could not be written (no space, no permission, not a file); the rest were."""


def is_stdout(path: str) -> bool:
    """Whether an --output is this process's stdout (`/dev/stdout`, `/proc/self/fd/1`, the file stdout is): the
    verdict line would then land inside a JSON or XML document a script reads."""
    try:
        here, there = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def emit(report: Report, pairs: list[tuple[str, Optional[str]]], *, verbose: bool = False,
         fail_on_level: str = "error", env: Optional[dict[str, str]] = None, saved: Optional[str] = None,
         prints: Any = None, quiet: bool = False) -> None:
    """Write the report in every requested format; each file atomically, text on a tty in colour (or with
    FORCE_COLOR; never with NO_COLOR). `quiet`: the text on the terminal is the verdict line alone. When no
    format goes to the terminal, the verdict line and the files written still do (as pytest with --junitxml).

    An output that cannot be written does not stop the others (the terminal's verdict included); then
    OutputNotWritten (exit 2) names each one, and `saved`, the run folder that keeps the report anyway.
    """
    safe = redacted(report, env, prints)
    saved = saved or report.run.get("dir")
    failed = []
    for fmt, out in pairs:
        if out is None:
            text = render(safe, fmt, verbose=verbose, color=color_wanted(sys.stdout), fail_on=fail_on_level,
                          quiet=quiet)
            if fmt != "text":  # text escapes what it quotes itself and keeps its own colours; the rest have none
                text = visible(text)
            if fmt != "github":  # github escapes what it quotes itself; in any other, no line may be a command
                text = inert(text)
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except OSError:
                discard_stream(sys.stdout)  # a full or broken stdout: the files and the run folder still get it
            continue
        try:
            write_atomically(Path(out), render(safe, fmt, verbose=verbose, color=False, fail_on=fail_on_level))
        except OSError as exc:
            failed.append(f"--output {out}: {exc.strerror or exc}")
    if any(fmt == "github" for fmt, _ in pairs):
        append_step_summary(safe)
    if pairs and all(out is not None for _, out in pairs) and not any(is_stdout(out) for _, out in pairs):
        written = [out for _, out in pairs if f"--output {out}:" not in " ".join(failed)]
        try:
            line = visible(verdict_line(safe)) + (f" ({', '.join(written)})" if written else "")
            sys.stdout.write(inert(visible(line)) + "\n")  # output names are the user's: no line may be a command
            sys.stdout.flush()
        except OSError:
            discard_stream(sys.stdout)
    if failed:
        kept = f"; the report is kept in {saved}" if saved else ""
        raise OutputNotWritten("could not write " + "; ".join(failed) + kept)


def append_step_summary(safe: Report) -> None:
    """With `--format github` inside GitHub Actions: the Markdown summary, appended to $GITHUB_STEP_SUMMARY
    (the file GitHub made for it), within what is left of GitHub's 1 MiB for the step."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        fd = open_summary(path)
        what = one_of(path, _NAMED + named_in_report(safe))  # opened through no symlink: `path` is that file
        if what:  # a hostile or mistaken environment: appending would write into the user's own file
            os.close(fd)
            sys.stderr.write(inert(visible(f"dfdoctor: $GITHUB_STEP_SUMMARY ({path}) is {what}: the summary is not "
                                           "appended to it")) + "\n")
            return
        with os.fdopen(fd, "a", encoding="utf-8", errors="surrogateescape") as f:
            used = os.fstat(fd).st_size
            text = summary(safe, limit=max(0, SUMMARY_LIMIT - used - 1))
            if len(text.encode(errors="surrogateescape")) > SUMMARY_LIMIT - used:
                return  # the step's summary is already full; the annotations still say what went wrong
            f.write(text + "\n")
    except OSError as exc:
        sys.stderr.write(inert(visible(f"dfdoctor: could not append the summary to $GITHUB_STEP_SUMMARY ({exc})"))
                         + "\n")


def discard_stream(stream: Any) -> None:
    """Point a standard stream that cannot be written (closed pipe, full device) at /dev/null, so what is
    still buffered in it, and whatever comes later, goes nowhere instead of raising at exit."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def exit_code(report: Report, fail_on_level: str) -> int:
    """0 no problem, 1 a problem (docs/interface.md)."""
    if report.mode == "check":
        return 1 if any(counts_as_problem(r, fail_on_level) for r in report.checks) else 0
    return 0 if report.verdict.state in ("running", "ok") or (report.verdict.state == "pending" and not report.verdict.cause) else 1
