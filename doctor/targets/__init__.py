"""Where the job runs: `--target local | ssh://[user@]host[:port] | pct://[user@]host[:port]/VMID | lxc://NAME |
docker://CONTAINER`, parsed into a `Target` that knows how to run an argv there, exactly, through every hop.

Each kind is one class in `targets/kinds/` (how to reach, run, ship, probe, rehearse and clean up there), found by
its scheme through `targets/registry.py`; docs/architecture.md says how to add one."""

from __future__ import annotations

from typing import Optional

from dfdoctor.targets import kinds  # noqa: F401  (registers every kind)
from dfdoctor.targets.registry import kind_for, schemes, usage
from dfdoctor.targets.target import Target, shown_spec

KINDS = schemes()
USAGE = usage()


def parse_target(spec: Optional[str]) -> Target:
    """Parse a `--target` spec; a malformed one raises ValueError with one clear line (never quoting a password
    written into the spec). No spec is this machine. The one place the word `local` is read: everywhere else
    asks the parsed Target (`runs_here`), never compares text (tests/test_structure.py)."""
    spec = (spec or "local").strip()
    if spec == "local":
        return Target()
    try:
        return _parse(spec)
    except ValueError as exc:
        raise ValueError(str(exc).replace(repr(spec), repr(shown_spec(spec)))) from None


def _parse(spec: str) -> Target:
    scheme, sep, rest = spec.partition("://")
    if not sep:
        raise ValueError(f"{spec!r} is not a target: {USAGE}")
    scheme = scheme.lower()
    if scheme not in KINDS:
        raise ValueError(f"unknown target scheme {scheme!r}: {USAGE}")
    return kind_for(scheme).parse(spec, rest)


__all__ = ["Target", "parse_target", "shown_spec", "KINDS", "USAGE"]
