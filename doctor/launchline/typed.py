"""A launch line given after `--` (`dfdoctor check -- ssh root@H 'pct exec 200 -- nohup python3 t.py > t.log &'`):
the hops say where the job runs (a `--target`), the innermost Python command is the job, and its redirect is
the log the user will look at."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Optional

from dfdoctor.launchline.hops import LOCAL, base
from dfdoctor.launchline.launchpath import analyse
from dfdoctor.launchline.shell import join

# A command line whose program is one of these is a launch line, not the job itself.
HOP_PROGRAMS = {"ssh", "pct", "lxc-attach", "docker", "nohup", "setsid", "tmux", "screen", "sh", "bash", "dash"}


@dataclass(frozen=True)
class TypedLaunch:
    """What a typed launch line says: the line, where its job runs, the job, its cwd and log (None: unknown)."""

    line: str
    target: str
    command: list[str]
    cwd: Optional[str]
    log: Optional[str]
    where: str


def is_launch_line(command: list[str]) -> bool:
    """Whether a `--` command is a launch line to follow (ssh, pct exec, docker exec, nohup, tmux, sh -c, ...)."""
    if not command:
        return False
    name = base(command[0])
    if name == "docker":
        return command[1:2] == ["exec"]
    if name in ("sh", "bash", "dash"):
        return any(a.startswith("-") and "c" in a for a in command[1:2])
    return name in HOP_PROGRAMS


def read(command: list[str]) -> Optional[TypedLaunch]:
    """Follow the line's hops; None when no job is found in it."""
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


def target_of(chain: list[tuple[str, list[str]]]) -> str:
    """The `--target` a chain of hops reaches: ssh://, pct://, lxc://, docker://, or local."""
    spec = "local"
    for kind, prefix in chain:
        if kind == "ssh":
            spec = _ssh_spec(prefix)
        elif base(prefix[0]) == "pct" and spec.startswith("ssh://") and len(prefix) > 2:
            spec = "pct://" + spec[len("ssh://"):] + "/" + prefix[2]
        elif base(prefix[0]) == "lxc-attach" and spec == "local":
            name = _lxc_name(prefix)
            spec = f"lxc://{name}" if name else spec
        elif base(prefix[0]) == "docker" and spec == "local":
            spec = f"docker://{_docker_name(prefix)}"
    return spec


def _ssh_spec(prefix: list[str]) -> str:
    """`ssh -p 2222 -l root host` -> ssh://root@host:2222."""
    dest, user, port = prefix[-1], None, None
    i = 1
    while i < len(prefix) - 1:
        a = prefix[i]
        if a in ("-p", "-l") and i + 1 < len(prefix) - 1:
            if a == "-p":
                port = prefix[i + 1]
            else:
                user = prefix[i + 1]
            i += 2
            continue
        if a.startswith("-p") and len(a) > 2:
            port = a[2:]
        i += 1
    if "@" not in dest and user:
        dest = f"{user}@{dest}"
    return f"ssh://{dest}" + (f":{port}" if port else "")


def _lxc_name(prefix: list[str]) -> Optional[str]:
    for i, a in enumerate(prefix):
        if a in ("-n", "--name") and i + 1 < len(prefix):
            return prefix[i + 1]
        if a.startswith("--name="):
            return a.split("=", 1)[1]
    return None


def _docker_name(prefix: list[str]) -> str:
    i = 2
    while i < len(prefix) and prefix[i].startswith("-"):
        if prefix[i] in ("-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys"):
            i += 1
        i += 1
    return prefix[i] if i < len(prefix) else ""
