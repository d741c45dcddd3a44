"""`lxc://NAME`: an LXC container on this machine, entered with `lxc-attach` (no shell: the words are exec'd)."""

from __future__ import annotations

from typing import Optional, Sequence

from dfdoctor.shellquote import join, quote
from dfdoctor.targets.registry import TargetKind, program
from dfdoctor.targets.target import Target
from dfdoctor.lazy_re import compile_later

NAME = compile_later(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# lxc-attach's options that take the next word
_LXC_OPTS_WITH_ARG = ("-P", "--lxcpath", "-e", "-s", "-v", "--set-var", "-f", "--rcfile", "-u", "-g")


def parse_name(spec: str, scheme: str, rest: str) -> str:
    """A container's name (letters, digits, '.', '_', '-'); ValueError otherwise."""
    name = rest.rstrip("/")
    if not NAME.fullmatch(name or ""):
        raise ValueError(f"{spec!r}: {scheme} container name must be letters, digits, '.', '_' or '-'")
    return name


class Lxc(TargetKind):
    """An LXC container on this machine."""

    scheme = "lxc"
    usage = "lxc://NAME"
    detach_needs_pause = True
    hop_tool = "lxc-attach"
    hop_note = "lxc-attach: no shell; the words are exec'd as they are"

    def parse(self, spec: str, rest: str) -> Target:
        """`NAME`."""
        return Target(kind="lxc", name=parse_name(spec, "lxc", rest))

    def spell(self, target: Target) -> str:
        """`lxc://NAME`."""
        return f"lxc://{target.name}"

    def describe(self, target: Target) -> str:
        """`LXC container NAME on this machine`."""
        return f"LXC container {target.name} on this machine"

    def reach_fix(self, target: Target) -> str:
        """In lxc-attach's terms."""
        return f"Make `lxc-attach -n {target.name} -- true` work here: the container exists and runs (`lxc-ls -f`)."

    def wrap(self, target: Target, argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """`lxc-attach --clear-env -n NAME -- ARGV` (under `script` when a terminal is wanted)."""
        # --clear-env: the container has an environment of its own; dfdoctor's must not leak into it
        attach = ["lxc-attach", "--clear-env", "-n", target.name or "", "--", *argv]
        # lxc-attach gives the command a pty only when its own stdin is a terminal: `script` provides one
        return ["script", "-qefc", join(attach), "/dev/null"] if tty else attach

    def typed_line(self, target: Target, script: str) -> str:
        """`lxc-attach -n NAME -- sh -c SCRIPT`."""
        return f"lxc-attach -n {quote(target.name or '')} -- sh -c {quote(script)}"

    def transport_error(self, target: Target, returncode: Optional[int], stderr: str) -> Optional[str]:
        """lxc-attach's own complaint (no such container, not running)."""
        if returncode not in (None, 0) and "lxc-attach" in stderr and "Failed to get" in stderr:
            return stderr.strip().splitlines()[-1]
        return None

    def is_hop(self, argv: Sequence[str]) -> bool:
        """`lxc-attach ...`."""
        return program(argv) == "lxc-attach"

    def hop_split(self, argv: Sequence[str]) -> tuple[Optional[str], int]:
        """`lxc-attach [-n NAME | --name=NAME | -nNAME] [opts] [--] CMD...`."""
        i, cname = 1, None
        while i < len(argv) and argv[i] != "--":
            a = argv[i]
            if a in ("-n", "--name") and i + 1 < len(argv):
                cname = argv[i + 1]
                i += 2
                continue
            if a.startswith("--name="):
                cname = a.split("=", 1)[1]
            elif a.startswith("-n") and len(a) > 2:
                cname = a[2:]
            elif a in _LXC_OPTS_WITH_ARG:
                i += 1
            i += 1
        return cname, min(i + 1, len(argv))

    def hop_target(self, outer: Target, prefix: Sequence[str]) -> Optional[str]:
        """From this machine only: lxc://NAME (a container on another host has no spec of its own)."""
        if not outer.runs_here:
            return None
        name, _ = self.hop_split(prefix)
        return f"lxc://{name}" if name else None
