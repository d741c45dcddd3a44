"""The parsed `--target`: a small immutable value (its kind's scheme and the parts that say how to reach it).
Everything a kind does with it lives in its class under `targets/kinds/`, found through `targets/registry.py`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from dfdoctor.targets import registry
from dfdoctor.lazy_re import compile_later


@dataclass(frozen=True)
class Target:
    """A parsed `--target`: its kind and the parts that say how to reach it.

    `extra` holds the parts of a kind that has more than host, user, port, vmid and name (a pod's namespace
    and container), as (key, value) pairs so the value stays hashable."""

    kind: str = "local"
    host: Optional[str] = None
    user: Optional[str] = None
    port: Optional[int] = None
    vmid: Optional[str] = None
    name: Optional[str] = None
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def kind_class(self) -> "registry.TargetKind":
        """The class that knows how to reach, run, ship, probe, rehearse and clean up for this kind."""
        return registry.kind_for(self.kind)

    @property
    def runs_here(self) -> bool:
        """Whether the job runs on this machine, in this namespace (the `local` kind): paths, pids and the
        interpreter are this machine's, probes run in-process. An `lxc://` container is on this machine too, but
        in a namespace of its own: it does not run here. The one question "is the target this machine?" in
        dfdoctor; nothing compares a spec with "local" (tests/test_structure.py)."""
        return self.kind_class.runs_here

    @property
    def destination(self) -> Optional[str]:
        """`user@host` for ssh, as the OpenSSH client takes it."""
        if self.host is None:
            return None
        return f"{self.user}@{self.host}" if self.user else self.host

    def part(self, key: str) -> Optional[str]:
        """One of the kind's own parts from `extra` (None when absent)."""
        return dict(self.extra).get(key)

    def __str__(self) -> str:
        """The canonical spelling, which parses back to the same target."""
        return self.kind_class.spell(self)

    def describe(self) -> str:
        """In words, for findings: 'container 200 on root@pve (ssh, then pct exec)'."""
        return self.kind_class.describe(self)


# Up to the last `@`: a password may itself hold `@`, `/` or `:`.
_PASSWORD = compile_later(r"(://[^@/:]*:).*(@)", re.S)


def shown_spec(spec: str) -> str:
    """A spec as a message may quote it: a password written into it (`ssh://user:PASSWORD@host`) masked."""
    return _PASSWORD.sub(r"\1***\2", spec)
