"""persistence.session: start harmless sentinels on the target the ways a job can be started, end the session,
and see which survived. It asks only what the run needs:

- `launch --target`: one trial, the way that launch starts its recorder there (`strategies.for_launch`);
- `check` with the user's own line (--shell-command, --launcher, a line after `--`): the rows that line uses;
- `check --only persistence.session`, or the config's `strategies`: the matrix, whose best survivor is remembered
  for `launch --strategy auto`;
- otherwise nothing: there is no line of the user's to judge, and `launch` observes its own start.

An answer is reused while what would change it holds (the target's boot id, its interpreters:
`persistence.observe`); the report says when it was observed."""

from __future__ import annotations

import posixpath
import time
from typing import Iterator, Optional

from dfdoctor import causes
from dfdoctor.model import Result, error, fail, ok, skip, warn
from dfdoctor.probe import cannot_reach
from dfdoctor.registry import check
from dfdoctor.shellquote import quote
from dfdoctor.targets import transport

CHECK_ID = "persistence.session"
PTY_WORDS = ("create window failed", "fork failed", "No space left on device", "open terminal failed",
             "PTY allocation request failed")
# the detacher launch.path's reading found in a line -> the strategy that starts a job the same way
HANDOFFS = {"setsid -f": "nohup-setsid-f", "tmux": "tmux", "screen": "screen"}


def _here(ctx) -> Optional[str]:
    if ctx.target.runs_here:
        return ("the target is this machine: `dfdoctor launch` detaches the job itself "
                "(use --target to probe a remote session)")
    return None


# gates=False: its causes (killed-on-session-exit, pty-exhausted) never stop a launch, which observes its own start
@check(CHECK_ID, title="Which launch survives the session", phases=("pre",), timeout=75, not_applicable=_here,
       gates=False)
def persistence_session(ctx) -> Iterator[Result]:
    """Try the launch strategies the run can use through the real chain; recommend the one that survives."""
    # start-up: the experiment (targets/persistence.py) and the strategies are imported where this check runs, in
    # its worker (a --target's), and by the helpers below it calls; a local `check` never runs it (`_here`)
    from dfdoctor.targets import persistence, strategies

    target = ctx.target
    configured = ctx.option(CHECK_ID, "strategies")  # e.g. ["nohup-setsid-f", "tmux"]
    mode, trials, why = _what_to_ask(ctx, target, configured)
    with transport.connected(target) as conn_error:  # the run's shared connection: no cost when it is open
        if conn_error:
            yield cannot_reach(target, conn_error)
            return
        if mode == "none":
            yield skip(why)
            return
        interpreters = ("python3", "python", *([ctx.python] if ctx.python else []))
        # the matrix asked for by name is observed now; what a launch or a line needs is reused while true
        out = persistence.observe(target, interpreters=interpreters,
                                  reuse_s=0 if mode == "matrix" else persistence.REUSE_S, **trials)
    if out.unreachable:
        yield cannot_reach(target, out.unreachable)
        return
    if out.error:
        yield fail(f"could not set up the experiment on {target.describe()}: {out.error}")
        return
    if mode != "matrix":
        yield from _one_way(target, out, trials["only"][0], mode, why)
        return
    line = _recommended_line(ctx, target, out.best, out.facts.get("tools") or ())
    data = {"matrix": out.matrix, "best": out.best, "recommended": line, "skipped": out.skipped,
            "facts": out.facts, "seconds": round(out.seconds, 2), "asked": "matrix", **_cache_data(out)}
    try:
        strategies.remember(str(target), out.best, out.matrix)
    except OSError as exc:  # a read-only home must not hide the experiment's result
        data["remember_error"] = f"{strategies.state_file()}: {exc.strerror or exc}"
    evidence = _evidence(out)
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


def _what_to_ask(ctx, target, configured) -> tuple[str, dict, str]:
    """What this run needs to know, as (mode, the trials to run, words): mode "launch", "line", "matrix", or
    "none" (the words say why nothing is asked)."""
    from dfdoctor.targets import strategies  # start-up: see persistence_session

    if ctx.launching:
        name = strategies.for_launch(str(target), ctx.strategy)
        return "launch", {"only": [name], "ttys": (False,), "pauses": (0.0,)}, \
            f"the way this launch starts its recorder there ({_words(name)})"
    if configured:
        return "matrix", {"only": list(configured)}, ""
    if ctx.shell_command or ctx.launcher:
        name, tty, why = _line_way(ctx)
        if name is None:
            return "none", {}, why
        return "line", {"only": [name], "ttys": (tty,), "pauses": (0.0,)}, \
            f"the way your line starts the job ({_words(name)}, {'with' if tty else 'without'} a terminal)"
    if CHECK_ID in ctx.only:
        return "matrix", {}, ""
    return "none", {}, ("no launch line of yours to judge (--shell-command, --launcher, or a line after --), so no "
                        "detach was tried: `dfdoctor launch` observes its own start there, and "
                        f"`--only {CHECK_ID}` tries every way")


def _line_way(ctx) -> tuple[Optional[str], bool, str]:
    """The strategy the user's line starts its job with, and whether it has a terminal there (launch.path's
    reading of the line); None, with the reason, when the line detaches nothing or its job was not found."""
    # start-up: the reading (launchpath.py, hops.py, the shell parser: 11 dataclasses) is imported where a line
    # is read, in this check's worker; a local `check` never runs this check, but imported it with the module
    from dfdoctor.launchline.launchpath import analyse, read_launcher

    text = None
    if ctx.launcher:
        try:
            text = read_launcher(str(ctx.abspath(ctx.launcher)))
        except OSError:
            text = None
    try:
        job = analyse(ctx.shell_command, str(ctx.launcher) if ctx.launcher else None, text,
                      str(ctx.log) if ctx.log else None).job
    except Exception as exc:  # a line the reader cannot take is launch.path's to report, not a pass here
        return None, False, f"your line could not be read ({type(exc).__name__}): launch.path reports on it"
    if job is None:
        return None, False, "no Python job found in your line: launch.path reports on it"
    f = job.frame
    if f.handoff in HANDOFFS:
        return HANDOFFS[f.handoff], f.tty, ""
    if f.background_at is None:
        return None, f.tty, ("your line starts the job in the foreground of its session, so there is no detach to "
                             "try: launch.path's rehearsal of the line observes what becomes of it")
    out = f.fds.get(1)
    if f.nohup:
        return ("nohup-bare" if out is not None and out.path == "nohup.out" else "nohup"), f.tty, ""
    return "amp", f.tty, ""


def _one_way(target, out, name: str, mode: str, way: str) -> Iterator[Result]:
    """The answer to one question: does this one way of starting a job outlive its session there?"""
    trials = [t for t in out.trials if t.strategy.name == name]
    data = {"matrix": out.matrix, "asked": mode, "strategy": name, "skipped": out.skipped, "facts": out.facts,
            "seconds": round(out.seconds, 2), **_cache_data(out)}
    evidence = _evidence(out)
    when = _when(out)
    if not trials or any(t.survived is None for t in trials):
        why = out.skipped.get(name) or "its sentinel was not seen"
        yield warn(f"not observed on {target.describe()}: {way}, because {why}", None, evidence=evidence, data=data)
        return
    if any(w in t.stderr for t in trials for w in PTY_WORDS):
        t = next(t for t in trials if any(w in t.stderr for w in PTY_WORDS))
        yield warn(f"no pseudo-terminal could be allocated for {name} on {target.describe()}: "
                   f"{t.stderr.strip().splitlines()[-1]}", causes.PTY_EXHAUSTED,
                   details="tmux (and ssh -t) need a free pty; in an LXC container raise lxc.pty.max.",
                   evidence=evidence, data=data)
    if all(t.survived for t in trials) and not any(t.held for t in trials):
        yield ok(f"on {target.describe()}, {way} outlives its session; {when}", evidence=evidence, data=data)
        return
    if all(t.survived for t in trials):
        yield warn(f"on {target.describe()}, {way} kept its session from returning: its output was still tied to "
                   f"it; {when}", causes.KILLED_ON_SESSION_EXIT, evidence=evidence, data=data,
                   fix="Send every output of the job to a file (`</dev/null >>LOG 2>&1`).")
        return
    fix = ("Start the recorder another way: `dfdoctor check --target "
           f"{target} --only {CHECK_ID}` finds which survives there, and `launch --strategy NAME` uses it."
           if mode == "launch" else "launch.path's rehearsal of your line gives the line to use instead.")
    yield fail(f"on {target.describe()}, {way} did not outlive its session; {when}", causes.KILLED_ON_SESSION_EXIT,
               evidence=evidence, fix=fix, data=data)


def _evidence(out) -> tuple[str, ...]:
    """Each trial in words."""
    return tuple(f"{_words(r['strategy'])}; {'with' if r['tty'] == 'yes' else 'without'} a terminal"
                 f"{', the session ending ' + str(r['pause_s']) + ' s later' if r['pause_s'] else ''}: "
                 f"{'still running afterwards' if r['survived'] == 'yes' else 'gone afterwards' if r['survived'] == 'no' else 'not seen'}; "
                 f"the session returned: {r['session returned']}" for r in out.matrix) + _reuse_evidence(out)


def _when(out) -> str:
    """When the answer was observed, in words: now, or how long ago (reused from the cache)."""
    if out.cached_at is None:
        return f"{len(out.trials)} trial(s) in {out.seconds:.1f} s"
    return f"observed {_ago(time.time() - out.cached_at)} and reused (same boot, same interpreters)"


def _ago(s: float) -> str:
    """An age in words."""
    s = max(0.0, s)
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else f"{s / 3600:.1f} h ago"


def _reuse_evidence(out) -> tuple[str, ...]:
    """Where a reused answer came from, and what it is keyed by."""
    from dfdoctor.targets import persistence  # start-up: see persistence_session

    if out.cached_at is None or not out.identity:
        return ()
    pys = "; ".join(out.identity.get("interpreters") or ()) or "none"
    return (f"from dfdoctor's cache, observed {_ago(time.time() - out.cached_at)}: kept while the boot id there "
            f"({out.identity.get('boot_id')}) and the interpreters ({pys}) stay the same, at most "
            f"{persistence.REUSE_S / 3600:.0f} h",)


def _cache_data(out) -> dict:
    """The cache's facts for the renderers."""
    if out.cached_at is None:
        return {"cached": False}
    return {"cached": True, "observed_at": out.cached_at, "age_s": round(time.time() - out.cached_at, 1),
            "key": out.identity}


def _words(name: str) -> str:
    """A strategy in plain words."""
    from dfdoctor.targets import strategies  # start-up: see persistence_session

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
    # start-up: the rehearsal is this fix's alone, on a target; a local `check` and `launch` never load it
    from dfdoctor.rehearse import judge
    from dfdoctor.rehearse.runner import rehearse
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
    from dfdoctor.targets import strategies  # start-up: see persistence_session

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
