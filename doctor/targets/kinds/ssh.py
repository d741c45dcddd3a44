"""`ssh://[user@]host[:port]`: the OpenSSH client (so ~/.ssh/config, agents and jump hosts work), one shared
connection per dfdoctor run (ControlMaster, `transport.connected`). ssh hands the remote login shell ONE string,
so the argv is quoted for a POSIX shell once. `pct.py` reuses the parsing and the connection."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from typing import Iterator, Optional, Sequence

from dfdoctor.shellquote import join, quote
from dfdoctor.targets import transport
from dfdoctor.targets.transport import SSH_CONFIG_ENV
from dfdoctor.targets.registry import TargetKind, program, usage
from dfdoctor.targets.target import Target, shown_spec
from dfdoctor.lazy_re import compile_later

# All used with fullmatch: `$` also matches before a trailing newline, and `\d`/isdigit() take any script's digits.
_HOST = compile_later(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])")
_USER = compile_later(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_SSHISH = compile_later(r"(?:(?P<user>[^@/]*)@)?(?P<host>\[[^\]]*\]|[^:/]*)(?::(?P<port>[^/]*))?(?P<path>/.*)?", re.S)
ASCII_NUMBER = compile_later(r"[0-9]+")


def parse_host(spec: str, rest: str, usage: str) -> tuple[Optional[str], str, Optional[int], str]:
    """`[user@]host[:port][/path]` of an ssh-reached spec: user, host, port, path; ValueError if malformed."""
    m = _SSHISH.fullmatch(rest)
    if not m or not m.group("host"):
        raise ValueError(f"{spec!r}: no host: {usage}")
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
        if not ASCII_NUMBER.fullmatch(port_s) or not 0 < int(port_s) < 65536:
            raise ValueError(f"{spec!r}: port must be a number from 1 to 65535, not {port_s!r}")
        port = int(port_s)
    return user or None, host, port, path


def spell_host(target: Target) -> str:
    """`scheme://user@host:port` of an ssh-reached target."""
    port = f":{target.port}" if target.port else ""
    return f"{target.kind}://{target.destination}{port}"


class Ssh(TargetKind):
    """Another machine over ssh."""

    scheme = "ssh"
    usage = "ssh://[user@]host[:port]"
    hop_takes_one_string = True
    hop_tool = "ssh"
    hop_note = "ssh: the remote login shell parses ONE string"
    reached_over_ssh = True

    def parse(self, spec: str, rest: str) -> Target:
        """`[user@]host[:port]`, no path."""
        user, host, port, path = parse_host(spec, rest, usage())
        if path.strip("/"):
            raise ValueError(f"{spec!r}: ssh targets take no path (did you mean pct://{rest}?)")
        return Target(kind="ssh", host=host, user=user, port=port)

    def spell(self, target: Target) -> str:
        """`ssh://user@host:port`."""
        return spell_host(target)

    def describe(self, target: Target) -> str:
        """`user@host (over ssh)`."""
        return f"{target.destination} (over ssh)"

    def reach_fix(self, target: Target) -> str:
        """In ssh's terms: a prompt-free login."""
        return (f"Make `{ssh_typed(target, 'true')}` work without a prompt (keys, ~/.ssh/config, known_hosts: "
                "dfdoctor runs ssh with BatchMode=yes).")

    @contextlib.contextmanager
    def connected(self, target: Target) -> Iterator[Optional[str]]:
        """One ControlMaster for the block, closed (or killed) on the way out."""
        with transport.ssh_master(target) as err:
            yield err

    def wrap(self, target: Target, argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """`ssh OPTIONS -T -- host 'QUOTED ARGV'`."""
        return [*transport.ssh_base(target, tty=tty), join(list(argv))]

    def typed_line(self, target: Target, script: str) -> str:
        """`ssh [-p PORT] user@host 'SCRIPT'`."""
        return ssh_typed(target, script)

    def transport_error(self, target: Target, returncode: Optional[int], stderr: str) -> Optional[str]:
        """ssh's exit 255 is its own failure; its last lines say why."""
        if returncode != 255:
            return None
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        return "; ".join(lines[-3:]) or "ssh exited with status 255"

    def is_hop(self, argv: Sequence[str]) -> bool:
        """`ssh ...`."""
        return program(argv) == "ssh"

    def hop_login_options(self, prefix: Sequence[str]) -> Optional[tuple[str, ...]]:
        """`ssh -F cfg -i key host`: -F cfg -i key (hop_options: never one that runs a command here)."""
        return hop_options(prefix)

    def hop_target(self, outer: Target, prefix: Sequence[str]) -> Optional[str]:
        """`ssh -p 2222 -l root host` -> ssh://root@host:2222 (a later ssh hop replaces an earlier one)."""
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


def ssh_typed(target: Target, remote: str) -> str:
    """`ssh [-F CONFIG] [-p PORT] [USER'S OPTIONS] user@host 'REMOTE'`, as a person types it: with the config file
    dfdoctor's own ssh used ($DFDOCTOR_SSH_CONFIG) unless the user's hop names its own, without which the printed
    line would not reach where dfdoctor did."""
    users = user_options(target)
    cfg = os.environ.get(SSH_CONFIG_ENV)
    config = f"-F {quote(cfg)} " if cfg and "-F" not in users else ""
    port = f"-p {target.port} " if target.port else ""
    mine = f"{join(users)} " if users else ""
    return f"ssh {config}{port}{mine}{target.destination} {quote(remote)}"


# ssh options of a user's hop that say how to reach the same place, kept for every check that goes there (issue
# 39); those that run a command on this machine are never taken from a line (ProxyCommand, LocalCommand, ...)
_WITH_VALUE = {"-F", "-i", "-J", "-o"}
_RUNS_HERE = {"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "remotecommand",
              "proxyusefdpass"}


def hop_options(prefix: Sequence[str]) -> tuple[str, ...]:
    """The options of an `ssh ... host` hop that reach the same place (-F, -i, -J, -o KEY=VALUE), in order;
    never one that runs a command here."""
    out: list[str] = []
    i = 1
    while i < len(prefix) - 1:
        a = prefix[i]
        value = prefix[i + 1] if a in _WITH_VALUE and i + 1 < len(prefix) - 1 else None
        if value is None and len(a) > 2 and a[:2] in _WITH_VALUE:
            a, value = a[:2], a[2:]
            i -= 1
        if value is not None:
            key = re.split(r"[=\s]", value.strip(), 1)[0].lower()
            if not (a == "-o" and key in _RUNS_HERE):
                out += [a, value]
            i += 2
            continue
        i += 1
    return tuple(out)


def user_options(target: Target) -> list[str]:
    """The user's own hop options a target carries (see hop_options)."""
    words = target.part("ssh_options")
    return shlex.split(words) if words else []
