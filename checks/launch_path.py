"""launch.path: read the launch line the way every shell on its way reads it, then rehearse it.

The reading (launchline/) finds the questions: which shell opens the log, whether a tty hangs the job up. The
rehearsal (rehearse/) answers them: it runs the exact line with the training program swapped for a sentinel,
and what the sentinel saw is an observed fact, so it may fail the check and block a launch. Where no rehearsal
could run (a hop unreachable, a line dfdoctor cannot rewrite faithfully), the reading only warns, and says why
it could not observe. The one fix to copy is composed from what was seen, rehearsed the same way, and printed
only when it worked."""

from __future__ import annotations

from pathlib import Path
from posixpath import basename as base  # a command word's program name, as launchline.hops says it
from typing import TYPE_CHECKING, Iterator, Optional

from dfdoctor import causes
from dfdoctor.launchline.wrappers import SHELLS, read_shell
from dfdoctor.shellquote import join, quote
from dfdoctor.model import STATIC, Result, fail, ok, skip, warn
from dfdoctor.registry import check
from dfdoctor.safefile import read_head

if TYPE_CHECKING:
    from dfdoctor.launchline.launchpath import Analysis
    from dfdoctor.rehearse.ahead import Ahead
    from dfdoctor.rehearse.runner import Rehearsal

def _no_line(ctx) -> Optional[str]:
    """No line to analyse, said without a worker (see Check.not_applicable): no --shell-command, no --launcher,
    and no command that could be a launcher script here (on a target it is never read as one), else None."""
    if ctx.shell_command or ctx.launcher or (ctx.command and ctx.target.runs_here):
        return None
    return NOTHING


NOTHING = "no --shell-command or --launcher given: nothing to analyse"


@check("launch.path", title="Launch line, hop by hop, rehearsed", phases=("pre",), timeout=40, not_applicable=_no_line)
def launch_path(ctx) -> Iterator[Result]:
    """Explain `--shell-command` / `--launcher` hop by hop, rehearse it, and give the one fix seen to work. A
    launcher given as the command (`check -- ./launch.sh`, `check -- bash launch.sh`) is read as --launcher is."""
    launcher = ctx.launcher or _launcher_of_command(ctx)
    if not ctx.shell_command and not launcher:
        yield skip(NOTHING)
        return
    # start-up: the rehearsal (rehearse/: 27 modules, 0.012 CPU-s) is imported by a check that has a line to
    # rehearse, in its worker, not with the check by every `check` and `launch` (round 19); so is the line's
    # reading (launchline/launchpath.py, hops.py and the shell parser: 11 dataclasses, 0.04 G instructions)
    from dfdoctor.launchline.launchpath import analyse, read_launcher
    from dfdoctor.rehearse import judge
    from dfdoctor.rehearse.ahead import Ahead
    from dfdoctor.rehearse.runner import rehearse
    launcher_text = None
    if launcher:
        try:
            launcher_text = read_launcher(str(ctx.abspath(launcher)))
        except OSError as exc:
            yield warn(f"cannot read the launcher {launcher}: {exc.strerror or exc}", None,
                       fix="Pass the launcher script's path as it exists on this machine.")
    log = str(ctx.log) if ctx.log else None
    typed = ctx.shell_command or (join(ctx.command) if launcher and not ctx.launcher else None)
    a = analyse(typed, str(launcher) if launcher else None, launcher_text, log)
    data = _data(a)
    hops = tuple(f"hop {h.index} ({h.where}, parsed by {h.parsed_by}, tty {'yes' if h.tty else 'no'}): "
                 f"{h.command}" for h in a.hops)
    where = {"cwd": _local_cwd(ctx), "launcher": str(launcher) if launcher else None, "launcher_text": launcher_text}
    line = _line(ctx, typed, launcher, launcher_text)
    # where the reading says the line fails, the fix's lines are rehearsed beside it (ahead.py)
    ahead = Ahead(line, log, _remote_cwd(ctx), **where) if line and any(f.status == "fail" for f in a.findings) \
        else None
    try:
        r = rehearse(line, planned=ahead.planned if ahead else None, **where) if line else None
        seen = _seen(ctx, r, log, launcher, where, ahead) if r is not None and not r.unobservable else None
    finally:
        if ahead is not None:
            ahead.close()
    if seen is None:
        why = r.unobservable if r is not None else "only a line typed on this machine can be rehearsed"
        yield from _reading(a, data, hops, why)
        return
    observed, unsure, wrapped, fx = seen
    facts = tuple(judge.facts(r))
    data["rehearsal"] = {"line": r.plan.line if r.plan else None, "facts": list(facts), "seconds": round(r.seconds, 2),
                         "not_rehearsed": [list(x) for x in (r.plan.not_rehearsed if r.plan else [])]}
    if fx is not None:
        data["fix"] = {"line": fx.line, "works": fx.works, "why_not": fx.why_not, "first": fx.first,
                       "changes": fx.changes, "interpreter": fx.interpreter,
                       "facts": judge.facts(fx.rehearsal) if fx.rehearsal else []}
        data["corrected"] = fx.line if fx.works else None
    for o in observed:
        # the shell opens a line's redirects before any of its commands runs: a log it could not open is observed
        # whatever the unknown program would have done
        not_run = unsure or ([] if o.cause in _OPENED_FIRST else wrapped)
        if not_run:
            data["not_rehearsed"] = "; ".join(not_run)  # check's verdict: not OK, the line was not seen to work
            yield warn(f"not rehearsed in full: {o.summary}, but {not_run[0]}, so this was not observed of your "
                       "line", o.cause, details="\n".join([o.details, "Not rehearsed: " + "; ".join(not_run) + "."]
                                                        ).strip(),
                       fix="not tried (the line was not rehearsed in full)", evidence=facts + hops, data=data,
                       basis=STATIC)
            continue
        advice = fx.words() if fx else _untried_folder(o, r, wrapped)
        yield fail(o.summary, o.cause, details=o.details, fix=advice, evidence=facts + hops, data=data)
    for f in a.findings:
        # The reading's "may fail" findings stay as warnings beside what was seen (a `cd` not joined with `&&`,
        # buffering); its "fails" ones were put to the test, and what the rehearsal saw replaces them.
        if f.status != "warn" or (f.cause == causes.KILLED_ON_SESSION_EXIT and not observed):
            continue
        advice = f.fix if f.fix and f.fix != a.corrected else (fx.words() if fx else "")
        yield warn(f"on {a.hops[f.hop].where}: {f.summary}", f.cause, details=f.details,
                   fix=advice, evidence=hops, data=data, basis=STATIC)
    skipped = _not_rehearsed(r)
    if skipped:
        data["not_rehearsed"] = skipped
        yield warn(f"not rehearsed: {skipped}", None, evidence=facts + hops, data=data, basis=STATIC,
                   details="A rehearsal runs only what it has proved harmless (docs/checks.md#launchpath): what it "
                           "did not run, it cannot vouch for.")
    held = _held_open(r, data, facts + hops) if not observed and not wrapped else None
    if held:
        yield held
    if not observed and not wrapped:  # a program dfdoctor did not run is never passed
        where = r.plan.job.where if r.plan and r.plan.job else "?"
        yield ok(f"rehearsed: the job starts in {where}, outlives its session and writes its log",
                 evidence=facts + hops, data=data)


def _held_open(r: Rehearsal, data: dict, evidence: tuple) -> Optional[Result]:
    """The job started and outlived its session, but the session did not return by itself: the line typed
    waits (ssh does not give the prompt back) until the job ends, hours for a training run. Seen, so a warning,
    with what held it: the job's own descriptors, else the shell that waits for it (the static reading's
    "not on a part of an `&&` list", dropped once the job was seen to survive the session's end)."""
    p = r.job_place
    if not (r.held and r.started and r.alive and p and p.start):
        return None
    fds = p.start.get("fds") or [{}, {}, {}]
    held = [name for name, fd in zip(("input", "output", "error output"), fds)
            if (fd or {}).get("kind") in ("socket", "pipe", "tty")]
    which = f"the job keeps the session's {' and '.join(held)} open" if held else \
        "a shell of your line that waits for the job keeps the session's output open: `cd … && cmd > LOG &` puts " \
        "the whole list in the background, and only `cmd` has the redirect"
    return warn(f"rehearsed: the job starts and outlives its session, but your line does not return until the job "
                f"ends ({which}): the prompt would not come back", None, evidence=evidence, data=data,
                fix="Redirect the whole part you put in the background, `( … ) > LOG 2>&1 < /dev/null &`, so that "
                    "nothing of the session is left to it; not tried.")


def _seen(ctx, r: Rehearsal, log: Optional[str], launcher, where: dict, ahead: Optional[Ahead]):
    """What the rehearsal saw fail, what of the line it could not run (unsure, wrapped), and the fix searched for
    where a failure was seen of a line run in full."""
    from dfdoctor.rehearse import fix as rehearsed_fix, judge  # start-up: see launch_path
    observed = judge.findings(r, log)
    if launcher and not ctx.launcher and not ctx.shell_command:
        # the command is what `dfdoctor launch` starts, detached under its recorder: whether a terminal's session
        # ending would take it down is no question for it; all else the rehearsal saw is
        observed = [o for o in observed if o.cause != causes.KILLED_ON_SESSION_EXIT]
    unsure = list(r.plan.uncertain) if r.plan else []
    wrapped = list(r.plan.wrapped) if r.plan else []
    # a failure seen while a part that may change what the job finds was not run is not an observed failure of
    # the line (REHEARSAL.md): it is said, as a warning, with what was not run. A program the wrapper table does
    # not know was not run either: no fix line is composed without it
    fx = rehearsed_fix.find(r, log, folder=_remote_cwd(ctx), ahead=ahead, **where) \
        if observed and not unsure and not wrapped else None
    return observed, unsure, wrapped, fx


# what the shell does before any command of the line runs: observed even where a command was not run
_OPENED_FIRST = (causes.LOG_DIR_MISSING, causes.LOG_NOT_WRITABLE)


def _untried_folder(o, r: Rehearsal, wrapped: list[str]) -> str:
    """The advice for a log folder missing in a line whose job runs under a program dfdoctor did not run: no line
    composed without that program, only the folder to create, not tried."""
    path = o.path or next((lg.typed for lg in r.plan.logs if lg.where == o.where and not lg.dynamic), None)
    if not wrapped or o.cause != causes.LOG_DIR_MISSING or not path or "/" not in path:
        return ""
    folder = path.rsplit("/", 1)[0] or "/"
    return (f"create the log's folder first (`mkdir -p {quote(folder)}` on {o.where}); not tried: "
            f"{wrapped[0]}, so no line was rehearsed without it")


def _not_rehearsed(r: Rehearsal) -> str:
    """What of the line the rehearsal did not run, and why, in one line (the sentinel standing in for the
    training program is the rehearsal itself, not a part left out)."""
    from dfdoctor.rehearse.rewrite import STANDS_IN  # start-up: see launch_path
    parts = [f"{cmd}, because {why}" for cmd, why in (r.plan.not_rehearsed if r.plan else [])
             if not why.startswith(STANDS_IN)]
    return "; ".join(dict.fromkeys(parts))


def _line(ctx, typed: Optional[str], launcher, launcher_text: Optional[str]) -> Optional[str]:
    """The line to rehearse: the one the user types (or, alone, `bash LAUNCHER` on this machine)."""
    if not typed and launcher and launcher_text is not None and ctx.target.runs_here:
        return f"bash {quote(str(ctx.abspath(launcher)))}"
    return typed or None


def _launcher_of_command(ctx) -> Optional[Path]:
    """The shell script the command runs on this machine (`./launch.sh`, `bash -e launch.sh`), if it is one."""
    argv = list(ctx.command or [])
    if not argv or not ctx.target.runs_here:
        return None
    if base(argv[0]) in SHELLS:
        call = read_shell(argv)
        if call.command_string or call.script_at is None:
            return None
        word = argv[call.script_at]
    else:
        word = argv[0]
    path = ctx.abspath(word)
    if not path.is_file():
        return None
    if base(argv[0]) in SHELLS or path.suffix in (".sh", ".bash"):
        return path
    head = read_head(path, 128)  # the shebang line: never the whole file
    if head is None:
        return None
    first = head[:128].split(b"\n", 1)[0].decode(errors="replace")
    return path if first.startswith("#!") and base(first[2:].split()[-1] if first[2:].split() else "") in SHELLS \
        else None


def _local_cwd(ctx) -> Optional[str]:
    """Where the user's own shell runs the line: here, in --cwd when the job is local."""
    return str(ctx.cwd) if ctx.target.runs_here and ctx.cwd.is_dir() else None


def _remote_cwd(ctx) -> Optional[str]:
    """The job's folder on a target, as --cwd (or the line's `cd`) gave it: a place the fix looks for the script."""
    given = str(ctx.cwd) if ctx.cwd else ""
    return given if not ctx.target.runs_here and given.startswith("/") else None


def _reading(a: Analysis, data: dict, hops: tuple, why: str) -> Iterator[Result]:
    """No rehearsal: the reading's findings as warnings, each saying why it could not be observed."""
    note = f"could not rehearse the line: {why}"
    data["rehearsal"] = {"line": None, "why_not": why}
    data["not_rehearsed"] = why
    data["untried"] = a.corrected
    for f in a.findings:
        make = fail if f.status == "fail" else warn  # a static basis makes a fail a warn (model.Result)
        yield make(f"on {a.hops[f.hop].where}: {f.summary}", f.cause,
                   details=(f.details + "\n" if f.details else "") + note[0].upper() + note[1:] + ".",
                   fix=f"not tried (no rehearsal could run): {f.fix}" if f.fix else "",
                   evidence=hops + (f"the reading says: {'fails' if f.status == 'fail' else 'may fail'}", note),
                   data=data, basis=STATIC)
    # read, not run: never a pass, never an observed failure (REHEARSAL.md)
    yield warn(f"not rehearsed: {why}" + (f" (read without running it: the job ({_job(a)}) looks detached and "
                                          "logging where you expect)" if a.job and not a.findings else ""),
               None, evidence=hops + (note,), data=data, basis=STATIC)


def _job(a: Analysis) -> str:
    """The job in words, for summaries."""
    return f"{join(a.job.argv)} in {a.job.frame.where}" if a.job else "?"


def _data(a: Analysis) -> dict:
    """Tables for the renderers: the hops, the findings, the job and the line to copy."""
    return {"hops": [h.row() for h in a.hops],
            "findings": [{"hop": f.hop, "status": f.status, "cause": f.cause, "finding": f.summary}
                         for f in a.findings],
            "job": {"command": join(a.job.argv), "where": a.job.frame.where,
                    "stdout": a.job.frame.fds[1].describe() if 1 in a.job.frame.fds else "?"} if a.job else None,
            "corrected": None}
