"""A launch line given after `--` (`dfdoctor check -- ssh root@H 'pct exec 200 -- nohup python3 t.py > t.log &'`):
the hops say where the job runs (a `--target`), the innermost Python command is the job, and its redirect is
the log the user will look at."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import Optional

from dfdoctor.launchline.wrappers import read_shell
from dfdoctor.launchline.hops import LOCAL, base
from dfdoctor.launchline.launchpath import analyse
from dfdoctor.shell import join
from dfdoctor.targets import Target, parse_target
from dfdoctor.targets.registry import hop_kind, kind_for

# Besides a hop of a target kind (ssh, pct exec, lxc-attach, docker exec): a command line whose program is one of
# these is a launch line, not the job itself. (`pct` alone too: it is followed, and holds no job.)
DETACHERS = {"nohup", "setsid", "tmux", "screen", "pct"}


@dataclass(frozen=True)
class TypedLaunch:
    """What a typed launch line says: the line, where its job runs, the job, its cwd and log (None: unknown)."""

    line: str
    target: Target
    command: list[str]
    cwd: Optional[str]
    log: Optional[str]
    where: str


def is_launch_line(command: list[str]) -> bool:
    """Whether a `--` command is a launch line to follow (ssh, pct exec, docker exec, nohup, tmux, sh -c, ...)."""
    if not command:
        return False
    if hop_kind(command) is not None:
        return True
    name = base(command[0])
    if name in ("sh", "bash", "dash"):
        return read_shell(command).command_string  # options read by name: `--rcfile F` is no `-c`
    return name in DETACHERS


def read(command: list[str]) -> Optional[TypedLaunch]:
    """Follow the line's hops; None when no job is found in it (ValueError: the hops name a malformed target)."""
    line = join(command)
    a = analyse(line)
    if a.job is None or not a.job.argv:
        return None
    frame = a.job.frame
    out = frame.fds.get(1)
    log = out.path if out is not None and out.kind == "file" and "$" not in out.path else None
    cwd = frame.cwd if frame.cwd and frame.cwd.startswith("/") else None
    if log and not log.startswith("/") and cwd:
        log = posixpath.join(cwd, log)
    return TypedLaunch(line, target_of(frame.chain), list(a.job.argv), cwd, log,
                       frame.where if frame.where != LOCAL else "this machine")


def target_of(chain: list[tuple[str, list[str]]]) -> Target:
    """The `--target` a chain of hops reaches (each hop's kind says where it leads from the target so far); a hop
    that names a malformed target (`ssh -p 0 h`) raises ValueError in parse_target's one line."""
    reached, options = Target(), ()
    for scheme, prefix in chain:
        kind = kind_for(scheme)
        spec = kind.hop_target(reached, prefix)
        if spec is not None:
            reached = parse_target(spec)
        own = kind.hop_login_options(prefix)  # the user's own ways of reaching that host, for every check there
        if own is not None:
            options = own
    if options and kind_for(reached.kind).reached_over_ssh:
        reached = replace(reached, extra=(*reached.extra, ("ssh_options", join(list(options)))))
    return reached


def launch_note(ctx) -> str:
    """What `launch` says before it starts a job read out of a typed line: the line as typed, what reads wrong in
    it (the reading's failures: a `>` opened by another host's shell, a job that dies with its session), and
    what dfdoctor starts instead."""
    a = analyse(ctx.typed_line)
    wrong = [f"  - on {a.hops[f.hop].where}: {f.summary}" for f in a.findings if f.status == "fail"]
    where = f", in {ctx.cwd_note or ctx.cwd}" if not ctx.target.runs_here else ""
    return "\n".join([f"dfdoctor launch: your line: {ctx.typed_line}",
                      *(["  what is wrong with it (read, not run):", *wrong] if wrong else []),
                      f"  instead, starting {join(ctx.command)} on {ctx.target} under the flight recorder"
                      + (f", its output appended to {ctx.log}" if ctx.log else "") + where])

