"""A launch line given after `--` (`dfdoctor check -- ssh root@H 'pct exec 200 -- nohup python3 t.py > t.log &'`):
the hops say where the job runs (a `--target`), the innermost Python command is the job, and its redirect is
the log the user will look at."""

from __future__ import annotations

import os
import posixpath
import subprocess
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

from dfdoctor.launchline.wrappers import read_shell
from dfdoctor.shellquote import join
from dfdoctor.targets import Target, parse_target, transport
from dfdoctor.targets.registry import hop_kind, kind_for

if TYPE_CHECKING:
    from dfdoctor.launchline.hops import Fd

# Besides a hop of a target kind (ssh, pct exec, lxc-attach, docker exec): a command line whose program is one of
# these is a launch line, not the job itself. (`pct` alone too: it is followed, and holds no job.)
DETACHERS = {"nohup", "setsid", "tmux", "screen", "pct"}
LOOK_S = transport.CONNECT_TIMEOUT_S + 4  # one `test -d` on a host: its connection, and a moment


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
    name = posixpath.basename(command[0])  # hops.base: a plain `python3 ...` imports no hop reader
    if name in ("sh", "bash", "dash"):
        return read_shell(command).command_string  # options read by name: `--rcfile F` is no `-c`
    return name in DETACHERS


def read(command: list[str]) -> Optional[TypedLaunch]:
    """Follow the line's hops; None when no job is found in it (ValueError: the hops name a malformed target)."""
    # imported here: only a line with hops is read (`check -- python3 t.py` is none; issue 45)
    from dfdoctor.launchline.hops import LOCAL
    from dfdoctor.launchline.launchpath import analyse
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
    from dfdoctor.launchline.launchpath import analyse  # imported here: see read
    a = analyse(ctx.typed_line)
    wrong = [f"  - on {a.hops[f.hop].where}: {_looked_at(a, f.summary)}" for f in a.findings if f.status == "fail"]
    where = f", in {ctx.cwd_note or ctx.cwd}" if not ctx.target.runs_here else ""
    return "\n".join([f"dfdoctor launch: your line: {ctx.typed_line}",
                      *(["  what is wrong with it (read, not run):", *wrong] if wrong else []),
                      f"  instead, starting {join(ctx.command)} on {ctx.target} under the flight recorder"
                      + (f", its output appended to {ctx.log}" if ctx.log else "") + where])



def _looked_at(a, summary: str) -> str:
    """The reading's words for a log opened by another hop's shell, once its folder was looked at there: written
    there, or nothing started at all (the folder is absent on that host: its shell cannot open the log). Any other
    finding as the reading said it."""
    from dfdoctor.launchline.launchfix import elsewhere  # imported here: see read
    job = a.job
    out = job.frame.fds.get(1) if job is not None else None
    if out is None or out.kind != "file" or summary != elsewhere(job.frame.where, out):
        return summary
    return elsewhere(job.frame.where, out, folder_exists(out))


def folder_exists(out: Fd) -> Optional[bool]:
    """Whether the folder of the file a redirect opens exists where the shell that opens it runs: on this machine,
    looked at here; else at the place the hops before it reach (`test -d`, through the user's own hop options);
    None where it could not be looked at (a variable in the path, a host that does not answer)."""
    from dfdoctor.launchline.launchfix import log_folder, path_word  # imported here: see read
    folder = log_folder(out.path)
    if "$" in folder:
        return None  # expanded by that shell, in its environment: not guessed here
    if not out.chain:
        return os.path.isdir(os.path.expanduser(folder))
    try:
        argv = transport.shell(target_of(list(out.chain)), f"test -d {path_word(folder)}")
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=LOOK_S)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(done.returncode)
