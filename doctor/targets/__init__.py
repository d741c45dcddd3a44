"""Where the job runs: `--target local | ssh://[user@]host[:port] | pct://[user@]host[:port]/VMID | lxc://NAME |
docker://CONTAINER`, parsed into a `Target` that knows how to run an argv there, exactly, through every hop."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

KINDS = ("local", "ssh", "pct", "lxc", "docker")
USAGE = ("use local, ssh://[user@]host[:port], pct://[user@]host[:port]/VMID, lxc://NAME or "
         "docker://CONTAINER")

# All used with fullmatch: `$` also matches before a trailing newline, and `\d`/isdigit() take any script's digits.
_HOST = re.compile(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SSHISH = re.compile(r"(?:(?P<user>[^@/]*)@)?(?P<host>\[[^\]]*\]|[^:/]*)(?::(?P<port>[^/]*))?(?P<path>/.*)?", re.S)
_ASCII_NUMBER = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Target:
    """A parsed `--target`: its kind and the parts that say how to reach it."""

    kind: str = "local"
    host: Optional[str] = None
    user: Optional[str] = None
    port: Optional[int] = None
    vmid: Optional[str] = None
    name: Optional[str] = None

    @property
    def is_local(self) -> bool:
        """Whether the job runs on this machine, in this namespace."""
        return self.kind == "local"

    @property
    def destination(self) -> Optional[str]:
        """`user@host` for ssh, as the OpenSSH client takes it."""
        if self.host is None:
            return None
        return f"{self.user}@{self.host}" if self.user else self.host

    def __str__(self) -> str:
        """The canonical spelling, which parses back to the same target."""
        if self.kind == "local":
            return "local"
        if self.kind in ("ssh", "pct"):
            port = f":{self.port}" if self.port else ""
            tail = f"/{self.vmid}" if self.kind == "pct" else ""
            return f"{self.kind}://{self.destination}{port}{tail}"
        return f"{self.kind}://{self.name}"

    def describe(self) -> str:
        """In words, for findings: 'container 200 on root@pve (over ssh)'."""
        if self.kind == "local":
            return "this machine"
        if self.kind == "ssh":
            return f"{self.destination} (over ssh)"
        if self.kind == "pct":
            return f"container {self.vmid} on {self.destination} (ssh, then pct exec)"
        if self.kind == "lxc":
            return f"LXC container {self.name} on this machine"
        return f"docker container {self.name}"


# Up to the last `@`: a password may itself hold `@`, `/` or `:`.
_PASSWORD = re.compile(r"(://[^@/:]*:).*(@)", re.S)


def shown_spec(spec: str) -> str:
    """A spec as a message may quote it: a password written into it (`ssh://user:PASSWORD@host`) masked."""
    return _PASSWORD.sub(r"\1***\2", spec)


def parse_target(spec: Optional[str]) -> Target:
    """Parse a `--target` spec; a malformed one raises ValueError with one clear line (never quoting a password
    written into the spec)."""
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
    if scheme in ("lxc", "docker"):
        name = rest.rstrip("/")
        if not _NAME.fullmatch(name or ""):
            raise ValueError(f"{spec!r}: {scheme} container name must be letters, digits, '.', '_' or '-'")
        return Target(kind=scheme, name=name)
    if scheme not in ("ssh", "pct"):
        raise ValueError(f"unknown target scheme {scheme!r}: {USAGE}")
    m = _SSHISH.fullmatch(rest)
    if not m or not m.group("host"):
        raise ValueError(f"{spec!r}: no host: {USAGE}")
    user, host, port_s, path = m.group("user"), m.group("host"), m.group("port"), m.group("path") or ""
    if user is not None and ":" in user:
        raise ValueError(f"{shown_spec(spec)!r}: a target takes no password (ssh asks for it itself; use a key "
                         "or an ssh agent)")
    if user is not None and not _USER.fullmatch(user):
        raise ValueError(f"{spec!r}: bad user name {user!r}")
    if not _HOST.fullmatch(host) or host.startswith("-"):
        raise ValueError(f"{spec!r}: bad host name {host!r}")
    port = None
    if port_s is not None:
        if not _ASCII_NUMBER.fullmatch(port_s) or not 0 < int(port_s) < 65536:
            raise ValueError(f"{spec!r}: port must be a number from 1 to 65535, not {port_s!r}")
        port = int(port_s)
    if scheme == "ssh":
        if path.strip("/"):
            raise ValueError(f"{spec!r}: ssh targets take no path (did you mean pct://{rest}?)")
        return Target(kind="ssh", host=host, user=user or None, port=port)
    vmid = path.strip("/")
    if not _ASCII_NUMBER.fullmatch(vmid):
        raise ValueError(f"{spec!r}: pct targets end in /VMID, a number (e.g. pct://root@pve/200)")
    return Target(kind="pct", host=host, user=user or None, port=port, vmid=vmid)


__all__ = ["Target", "parse_target", "shown_spec", "KINDS"]
