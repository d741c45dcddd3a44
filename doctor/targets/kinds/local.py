"""`local`: the job runs on this machine, in this namespace; nothing to reach, nothing to wrap."""

from __future__ import annotations

from typing import Optional, Sequence

from dfdoctor.targets.registry import TargetKind
from dfdoctor.targets.target import Target


class Local(TargetKind):
    """This machine: argvs run as they are, probes run in-process (killable, with stacks at SIGUSR1)."""

    scheme = "local"
    usage = "local"
    runs_here = True

    def parse(self, spec: str, rest: str) -> Target:
        """`local` has no parts: parse_target reads the bare word, and `local://...` is no spelling of it."""
        raise ValueError(f"{spec!r}: local takes nothing after it; write `--target local`")

    def spell(self, target: Target) -> str:
        """`local`."""
        return "local"

    def describe(self, target: Target) -> str:
        """`this machine`."""
        return "this machine"

    def reach_fix(self, target: Target) -> str:
        """Nothing to reach; the words only say so."""
        return "The target is this machine: nothing to reach."

    def wrap(self, target: Target, argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """The argv itself."""
        return list(argv)

    def typed_line(self, target: Target, script: str) -> str:
        """The script itself."""
        return script

    def transport_error(self, target: Target, returncode: Optional[int], stderr: str) -> Optional[str]:
        """No transport: a failure is always the command's own."""
        return None
