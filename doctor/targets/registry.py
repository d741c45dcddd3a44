"""The one table from a target scheme (`ssh`, `pct`, ...) to the class of that kind, and the interface every kind
implements. `targets/kinds/__init__.py` registers every kind (its list ALL is the one registration)."""

from __future__ import annotations

import contextlib
import posixpath
import signal
from typing import Iterator, Optional, Sequence

from dfdoctor.command import ProbeOutcome, run_command

# Methods take a `Target` (targets/target.py), named here only in annotations: target.py imports this module.


class TargetKind:
    """How dfdoctor reaches, runs, ships, probes, rehearses and cleans up on one kind of target.

    A kind is stateless: one instance serves every target of its scheme, which each method takes. A method
    left as `NotImplementedError` here must be written by every kind (tests/test_target_kinds.py checks)."""

    scheme: str = ""            # the word before `://` (local: the whole spec)
    usage: str = ""             # how the spec is spelled, for USAGE
    runs_here: bool = False     # the job runs on this machine, in this namespace: probes run in-process
    # A launch-line hop of this kind hands the next hop ONE string for a shell (ssh's remote login shell); else
    # the words are exec'd as they are (pct exec, lxc-attach, docker exec).
    hop_takes_one_string: bool = False
    # Detaching through this hop with a terminal needs a pause: lxc-attach (pct exec) given a pty ends the
    # attached process group as its command returns, which can catch a forked job before its setsid().
    detach_needs_pause: bool = False
    hop_tool: str = ""          # the program of the hop, for messages (`pct`, `lxc-attach`, `docker`)
    hop_note: str = ""          # what the hop does with the words, for the launch-path explanation
    # A target of this kind is reached through ssh: the options of the user's own ssh hop (-F, -i, -J, -o) reach
    # it as they reached the line's host (issue 39: every check goes where the line goes).
    reached_over_ssh: bool = False

    # -- reach ----------------------------------------------------------------------------------------
    def parse(self, spec: str, rest: str) -> "Target":
        """The target `spec` (`rest` is what follows `scheme://`); ValueError with one clear line if malformed."""
        raise NotImplementedError

    def spell(self, target: "Target") -> str:
        """The canonical spelling, which `parse` reads back to the same target."""
        raise NotImplementedError

    def describe(self, target: "Target") -> str:
        """In words, for findings."""
        raise NotImplementedError

    def reach_fix(self, target: "Target") -> str:
        """What to repair when reaching it failed, in the terms of the tool that could not get through."""
        raise NotImplementedError

    @contextlib.contextmanager
    def connected(self, target: "Target") -> Iterator[Optional[str]]:
        """Hold whatever connection the steps inside the block share; yield the error words if it cannot be
        opened. Clean-up is leaving the block: nothing of ours outlives it. Most kinds share nothing."""
        yield None

    # -- run ------------------------------------------------------------------------------------------
    def wrap(self, target: "Target", argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """The local argv that runs `argv` there with every word intact (a terminal there when `tty`)."""
        raise NotImplementedError

    def typed_line(self, target: "Target", script: str) -> str:
        """The line a person types to run a shell script there (for fixes to copy)."""
        raise NotImplementedError

    def transport_error(self, target: "Target", returncode: Optional[int], stderr: str) -> Optional[str]:
        """The transport's own words when reaching the target failed, else None (the command's own failure is
        not the transport's)."""
        raise NotImplementedError

    # -- ship -----------------------------------------------------------------------------------------
    def ship(self, target: "Target", argv: Sequence[str], data: bytes, *, timeout: float,
             hold_stdin: bool = False) -> ProbeOutcome:
        """Run `argv` there with `data` on its stdin (how probes, the recorder and the agent travel: nothing is
        installed on the target). The transport's failure, if any, is in `extra["transport_error"]`."""
        out = run_command(self.wrap(target, argv), timeout=timeout, stdin_data=data, hold_stdin=hold_stdin,
                          stack_signal=self.stack_signal())
        err = self.transport_error(target, out.returncode, out.stderr)
        if err:
            out.extra["transport_error"] = err
        return out

    # -- probe ----------------------------------------------------------------------------------------
    def stack_signal(self) -> Optional[int]:
        """The signal that makes a probe print its stacks before the kill: only one started here can get it
        from us (on a target the bootstrap keeps the deadline and sends it itself)."""
        return signal.SIGUSR1 if self.runs_here else None

    # -- rehearse: the kind as a hop in a launch line -------------------------------------------------
    def is_hop(self, argv: Sequence[str]) -> bool:
        """Whether a launch-line command is a hop of this kind (`ssh ...`, `pct exec ...`)."""
        return False

    def hop_split(self, argv: Sequence[str]) -> tuple[Optional[str], int]:
        """For an exec hop: the place it enters and the index of the first word it execs (len(argv): none)."""
        return None, len(argv)

    def hop_gives_tty(self, prefix: Sequence[str]) -> bool:
        """Whether the hop's own options give the command a terminal (`docker exec -t`)."""
        return False

    def hop_detaches(self, prefix: Sequence[str]) -> bool:
        """Whether the hop's own options hand the command to a daemon that discards its output (`docker exec -d`)."""
        return False

    def hop_target(self, outer: "Target", prefix: Sequence[str]) -> Optional[str]:
        """The `--target` spec that this hop's `prefix` reaches from `outer` (the target reached so far: the local
        one before any hop); None when it reaches no target dfdoctor can name (the target stays `outer`)."""
        return None

    def hop_login_options(self, prefix: Sequence[str]) -> Optional[tuple[str, ...]]:
        """The options of this hop that say how to reach its host, for every check that goes there (ssh's -F, -i,
        -J, -o); None for a hop that logs in nowhere (the options kept so far stay)."""
        return None

    def session_hop(self, prefix: Sequence[str]) -> list[str]:
        """The hop as dfdoctor's own (rehearsal) sessions use it: no terminal, stdin open."""
        return list(prefix)

    def typed_hop(self, prefix: Sequence[str]) -> list[str]:
        """The hop as a person types it again in a fix (without what only dfdoctor's sessions need)."""
        return list(prefix)


_BY_SCHEME: dict[str, TargetKind] = {}


def register(cls: type[TargetKind]) -> type[TargetKind]:
    """Make `cls` the class of targets spelled `cls.scheme://...` (and of its launch-line hops); a scheme is
    registered once."""
    if not cls.scheme or cls.scheme in _BY_SCHEME:
        raise ValueError(f"target kind {cls.__name__}: scheme {cls.scheme!r} is empty or taken")
    _BY_SCHEME[cls.scheme] = cls()
    return cls


def kind_for(scheme: str) -> TargetKind:
    """The kind of `scheme`; KeyError for one nobody registered."""
    return _BY_SCHEME[scheme]


def usage() -> str:
    """Every spelling, for a message: `use local, ssh://[user@]host[:port], ... or docker://CONTAINER`."""
    words = [k.usage for k in _BY_SCHEME.values()]
    return "use " + ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "use " + "".join(words)


def schemes() -> tuple[str, ...]:
    """Every registered scheme, in registration order (local first)."""
    return tuple(_BY_SCHEME)


def hop_kind(argv: Sequence[str]) -> Optional[TargetKind]:
    """The kind whose launch-line hop `argv` is (`ssh`, `pct exec`, `lxc-attach`, `docker exec`), else None."""
    if not argv:
        return None
    return next((k for k in _BY_SCHEME.values() if k.is_hop(argv)), None)


def program(argv: Sequence[str]) -> str:
    """The program word of a hop (`/usr/bin/ssh` -> `ssh`)."""
    return posixpath.basename(argv[0]) if argv else ""
