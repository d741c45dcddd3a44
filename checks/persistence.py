"""persistence.session: start harmless sentinels on the target every usual way, end the session, and see which
survived. The matrix is the evidence; the best survivor is remembered for `launch --strategy auto`."""

from __future__ import annotations

import posixpath
from typing import Iterator

from dfdoctor import causes
from dfdoctor.model import Result, error, fail, ok, skip, warn
from dfdoctor.probe import cannot_reach
from dfdoctor.registry import check
from dfdoctor.shell import quote
from dfdoctor.rehearse import judge
from dfdoctor.rehearse.runner import rehearse
from dfdoctor.targets import parse_target, persistence, strategies, transport

PTY_WORDS = ("create window failed", "fork failed", "No space left on device", "open terminal failed",
             "PTY allocation request failed")


@check("persistence.session", title="Which launch survives the session", phases=("pre",), timeout=75)
def persistence_session(ctx) -> Iterator[Result]:
    """Try every launch strategy through the real chain, with and without a tty; recommend the one that survives."""
    target = parse_target(ctx.target)
    if target.is_local:
        yield skip("the target is this machine: `dfdoctor launch` detaches the job itself "
                   "(use --target to probe a remote session)")
        return
    with transport.connected(target) as conn_error:
        if conn_error:
            yield cannot_reach(target, conn_error)
            return
        only = ctx.option("persistence.session", "strategies")  # e.g. ["nohup-setsid-f", "tmux"]
        out = persistence.run(target, only=only)
    if out.unreachable:
        yield cannot_reach(target, out.unreachable)
        return
    if out.error:
        yield fail(f"could not set up the experiment on {target.describe()}: {out.error}")
        return
    line = _recommended_line(ctx, target, out.best, out.facts.get("tools") or ())
    data = {"matrix": out.matrix, "best": out.best, "recommended": line, "skipped": out.skipped,
            "facts": out.facts, "seconds": round(out.seconds, 2)}
    try:
        strategies.remember(str(target), out.best, out.matrix)
    except OSError as exc:  # a read-only home must not hide the experiment's result
        data["remember_error"] = f"{strategies.state_file()}: {exc.strerror or exc}"
    evidence = tuple(f"{_words(r['strategy'])}; {'with' if r['tty'] == 'yes' else 'without'} a terminal"
                     f"{', the session ending ' + str(r['pause_s']) + ' s later' if r['pause_s'] else ''}: "
                     f"{'still running afterwards' if r['survived'] == 'yes' else 'gone afterwards' if r['survived'] == 'no' else 'not seen'}; "
                     f"the session returned: {r['session returned']}" for r in out.matrix)
    died_tty = sorted({t.strategy.name for t in out.trials if t.tty and t.survived is False})
    held = sorted({t.strategy.name for t in out.trials if t.held})
    pty = [t for t in out.trials if any(w in t.stderr for w in PTY_WORDS)]
    fix = _fix_words(ctx, target, line)
    data["fix"] = fix
    if out.left_behind:
        yield error(f"{out.left_behind} sentinel process(es) could not be removed from {target.describe()}",
                    details=f"They stop by themselves within {persistence.MAX_BEATS * persistence.BEAT_S:.0f} s.",
                    data=data)
    if pty:
        yield warn(f"no pseudo-terminal could be allocated for {pty[0].strategy.name} on {target.describe()}: "
                   f"{pty[0].stderr.strip().splitlines()[-1]}", causes.PTY_EXHAUSTED,
                   details="tmux (and ssh -t) need a free pty; in an LXC container raise lxc.pty.max.",
                   fix=fix, evidence=evidence, data=data)
    if out.best is None:
        yield fail(f"no launch strategy survived the end of its session on {target.describe()}: the session "
                   f"kills everything it started", causes.KILLED_ON_SESSION_EXIT,
                   details="Only a hand-off to a daemon that was running before the session survives such a "
                           "session: `at now`, a tmux server started outside it, or `systemd-run` where systemd "
                           "is PID 1.", evidence=evidence, data=data)
        return
    # Stable words: which launches died is a race on a loaded machine (docs/targets.md), so the summary names
    # no list; the details say, in words, what died every time and what only sometimes.
    always = [n for n in died_tty if all(t.survived is False for t in out.trials if t.tty and t.strategy.name == n)]
    sometimes = [n for n in died_tty if n not in always]
    if died_tty or held:
        parts = []
        if always:
            parts.append("Died with the session every time when it had a terminal (ssh -t): "
                         + "; ".join(_words(n) for n in always) + ".")
        if sometimes:
            parts.append("Died some of the time (a race with the hang-up the terminal sends as it closes): "
                         + "; ".join(_words(n) for n in sometimes) + ".")
        if held:
            parts.append("Kept the session from returning, because their output was still tied to it: "
                         + "; ".join(_words(n) for n in held) + ".")
        yield warn(f"on {target.describe()}, a job started in the background of a session can die when that "
                   "session ends; start it the way below", causes.KILLED_ON_SESSION_EXIT, details=" ".join(parts),
                   fix=fix, evidence=evidence, data=data)
    how = "with or without a terminal" if not out.best_needs_no_tty else "only without a terminal: drop ssh -t"
    yield ok(f"on {target.describe()}, a job {_words(out.best)} outlives its session ({how}); "
             f"{len(out.trials)} trials in {out.seconds:.1f} s", fix=fix, evidence=evidence, data=data)


def _words(name: str) -> str:
    """A strategy in plain words."""
    s = strategies.BY_NAME.get(name)
    return s.words if s and s.words else name


def _fix_words(ctx, target, line: str) -> str:
    """The report has one fix. With the user's own line (--shell-command) it is launch.path's, composed from
    the rehearsal of that line; here only a pointer to it. Without one, the recommended line is rehearsed the
    same way, and given only if its rehearsal passed."""
    if ctx.shell_command or ctx.launcher:
        return ""
    if not line:
        return ""
    tried = rehearse(line)
    if judge.passed(tried):
        return line
    problems = judge.findings(tried)
    why = problems[0].summary if problems else (tried.unobservable or "its rehearsal did not keep the job alive "
                                                "and logging")
    return f"no working line found; tried: {line} ({why})"


def _recommended_line(ctx, target, best, tools=()) -> str:
    """The launch line to copy: the job's own command started the best way on the target, with an interpreter
    that exists there, in the script's folder, logging to an absolute path."""
    if not best:
        return ""
    argv = list(ctx.command) or ["python3", "-u", "train.py"]
    if argv[0] in ("python", "python3") and tools and argv[0] not in tools:
        argv[0] = next((p for p in ("python3", "python") if p in tools), argv[0])
    if argv[0].startswith("python") and "-u" not in argv[1:2]:
        argv.insert(1, "-u")
    script = next((a for a in argv[1:] if a.endswith(".py")), None)
    cwd = posixpath.dirname(script) if script and script.startswith("/") else None
    log = str(ctx.log) if ctx.log else posixpath.join(cwd or "/tmp", "train.log")
    if not log.startswith("/"):
        log = posixpath.join(cwd or "/tmp", log)
    line = strategies.BY_NAME[best].line(argv, log, name="train", python=ctx.python or "python3")
    return transport.typed_line(target, f"cd {quote(cwd)} && {line}" if cwd else line)
