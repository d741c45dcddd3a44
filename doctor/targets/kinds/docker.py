"""`docker://CONTAINER`: a running container on this machine's docker daemon, entered with `docker exec -i`."""

from __future__ import annotations

from typing import Optional, Sequence

from dfdoctor.shellquote import quote
from dfdoctor.targets.kinds.lxc import parse_name
from dfdoctor.targets.registry import TargetKind, program
from dfdoctor.targets.target import Target

# What the docker client prints when it, not the command in the container, failed: no daemon, no permission on
# its socket, no such container, a stopped or paused one. (The command's own failure is the command's exit.)
DOCKER_SAYS = ("Cannot connect to the Docker daemon", "while trying to connect to the Docker daemon socket",
               "Error response from daemon:")
# docker exec's options that take the next word
_OPTS_WITH_ARG = ("-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys")


def exec_split(argv: Sequence[str]) -> tuple[Optional[str], int]:
    """`docker exec [opts] CONTAINER CMD...` (podman's is spelled the same): the container, the first word."""
    i = 2
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _OPTS_WITH_ARG:
            i += 1
        i += 1
    if i >= len(argv):
        return None, len(argv)
    return argv[i], i + 1


class Docker(TargetKind):
    """A docker container on this machine."""

    scheme = "docker"
    usage = "docker://CONTAINER"
    # the rehearsal's fix pauses after detaching through any exec hop (docs/targets.md); docker exec -t too
    detach_needs_pause = True
    hop_tool = "docker"
    hop_note = "docker exec: no shell; the words are exec'd as they are"

    def parse(self, spec: str, rest: str) -> Target:
        """`CONTAINER`."""
        return Target(kind="docker", name=parse_name(spec, "docker", rest))

    def spell(self, target: Target) -> str:
        """`docker://CONTAINER`."""
        return f"docker://{target.name}"

    def describe(self, target: Target) -> str:
        """`docker container NAME`."""
        return f"docker container {target.name}"

    def reach_fix(self, target: Target) -> str:
        """In the docker client's terms."""
        return (f"Make `docker exec {target.name} true` work here: the docker daemon running, its socket readable "
                "by this user (the docker group), and the container existing and running (`docker ps`).")

    def wrap(self, target: Target, argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """`docker exec -i [-t] CONTAINER ARGV` (-i: stdin reaches the command, which ships probes)."""
        return ["docker", "exec", "-i", *(["-t"] if tty else []), target.name or "", *argv]

    def typed_line(self, target: Target, script: str) -> str:
        """`docker exec CONTAINER sh -c SCRIPT`."""
        return f"docker exec {quote(target.name or '')} sh -c {quote(script)}"

    def transport_error(self, target: Target, returncode: Optional[int], stderr: str) -> Optional[str]:
        """The docker client's own complaint, if it made one."""
        if returncode in (None, 0):
            return None
        said = [ln.strip() for ln in stderr.splitlines() if any(m in ln for m in DOCKER_SAYS)]
        return said[-1] if said else None

    def is_hop(self, argv: Sequence[str]) -> bool:
        """`docker exec ...`."""
        return program(argv) == "docker" and list(argv[1:2]) == ["exec"]

    def hop_split(self, argv: Sequence[str]) -> tuple[Optional[str], int]:
        """`docker exec [opts] CONTAINER CMD...`."""
        return exec_split(argv)

    def hop_gives_tty(self, prefix: Sequence[str]) -> bool:
        """`-t`, `-it`, `-ti`."""
        return any(a in ("-t", "-it", "-ti") for a in prefix)

    def hop_detaches(self, prefix: Sequence[str]) -> bool:
        """`-d`, `--detach`, or a `d` among short flags (`-dit`): the daemon runs it."""
        return any(a in ("-d", "--detach") or (a.startswith("-") and not a.startswith("--") and "d" in a)
                   for a in prefix[2:])

    def hop_target(self, outer: Target, prefix: Sequence[str]) -> Optional[str]:
        """From this machine only: docker://CONTAINER (a `podman exec` hop, read like this one, is no docker)."""
        if not outer.runs_here or program(prefix) != "docker":
            return None
        return f"docker://{exec_split(prefix)[0] or ''}"

    def session_hop(self, prefix: Sequence[str]) -> list[str]:
        """`docker exec -i ...`: stdin for dfdoctor's sessions, never `-d` (detached) or `-t` (a terminal)."""
        out = ["docker", "exec", "-i"]
        for a in prefix[2:]:
            if a.startswith("-") and not a.startswith("--") and set(a[1:]) <= set("dit"):
                continue
            if a in ("--detach", "--tty", "--interactive"):
                continue
            out.append(a)
        return out

    def typed_hop(self, prefix: Sequence[str]) -> list[str]:
        """The hop without the `-i` dfdoctor's sessions added."""
        return [a for a in prefix if a != "-i"]
