"""persistence.session: start harmless sentinels on the target every usual way, end the session, and see which
survived. The matrix is the evidence; the best survivor is remembered for `launch --strategy auto`."""

from __future__ import annotations

from typing import Iterator

from dfdoctor import causes
from dfdoctor.model import Result, error, fail, ok, skip, warn
from dfdoctor.probe import cannot_reach
from dfdoctor.registry import check
from dfdoctor.targets import parse_target, persistence, strategies, transport

PTY_WORDS = ("create window failed", "fork failed", "No space left on device", "open terminal failed",
             "PTY allocation request failed")


@check("persistence.session", title="Which launch survives the session", phases=("pre",), timeout=60)
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
    line = _recommended_line(ctx, target, out.best)
    data = {"matrix": out.matrix, "best": out.best, "recommended": line, "skipped": out.skipped,
            "facts": out.facts, "seconds": round(out.seconds, 2)}
    try:
        strategies.remember(str(target), out.best, out.matrix)
    except OSError as exc:  # a read-only home must not hide the experiment's result
        data["remember_error"] = f"{strategies.state_file()}: {exc.strerror or exc}"
    evidence = tuple(f"{r['strategy']}, tty {r['tty']}, pause {r['pause_s']} s: survived {r['survived']}, "
                     f"session returned {r['session returned']}" for r in out.matrix)
    died_tty = sorted({t.strategy.name for t in out.trials if t.tty and t.survived is False})
    held = sorted({t.strategy.name for t in out.trials if t.held})
    pty = [t for t in out.trials if any(w in t.stderr for w in PTY_WORDS)]
    if out.left_behind:
        yield error(f"{out.left_behind} sentinel process(es) could not be removed from {target.describe()}",
                    details=f"They stop by themselves within {persistence.MAX_BEATS * persistence.BEAT_S:.0f} s.",
                    data=data)
    if pty:
        yield warn(f"no pseudo-terminal could be allocated for {pty[0].strategy.name} on {target.describe()}: "
                   f"{pty[0].stderr.strip().splitlines()[-1]}", causes.PTY_EXHAUSTED,
                   details="tmux (and ssh -t) need a free pty; in an LXC container raise lxc.pty.max.",
                   fix=line or "", evidence=evidence, data=data)
    if out.best is None:
        yield fail(f"no launch strategy survived the end of its session on {target.describe()}: the session "
                   f"kills everything it started", causes.KILLED_ON_SESSION_EXIT,
                   details="Only a hand-off to a daemon that was running before the session survives such a "
                           "session: `at now`, a tmux server started outside it, or `systemd-run` where systemd "
                           "is PID 1.", evidence=evidence, data=data)
        return
    if died_tty or held:
        parts = []
        if died_tty:
            parts.append(f"with a tty (ssh -t) these died with the session: {', '.join(died_tty)}")
        if held:
            parts.append(f"these kept the session from returning (output tied to it): {', '.join(held)}")
        yield warn("; ".join(parts), causes.KILLED_ON_SESSION_EXIT, fix=line, evidence=evidence, data=data)
    how = "with and without a tty" if not out.best_needs_no_tty else "only without a tty: drop ssh -t"
    yield ok(f"best launch on {target.describe()}: {out.best} (survives {how}); "
             f"{len(out.trials)} trials in {out.seconds:.1f} s", fix=line, evidence=evidence, data=data)


def _recommended_line(ctx, target, best) -> str:
    """The launch line to copy: the job's own command (or a placeholder) started the best way on the target."""
    if not best:
        return ""
    argv = list(ctx.command) or ["python", "-u", "train.py"]
    log = str(ctx.log) if ctx.log else "train.log"
    script = strategies.BY_NAME[best].line(argv, log, name="train", python=ctx.python or "python3")
    return transport.typed_line(target, script)
