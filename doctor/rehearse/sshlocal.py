"""The ssh client never runs a local command during a rehearsal (shared/REHEARSAL.md, issue 40 S3).

ssh runs commands of its own on the machine it starts on: `ProxyCommand` (to reach the host), `LocalCommand`
(after logging in, with `PermitLocalCommand`), `KnownHostsCommand`, and `Match exec` while it reads its
configuration. Every rehearsed ssh gets `PermitLocalCommand=no` first (ssh keeps the first value given), so a
LocalCommand never runs; a hop that needs a ProxyCommand or a KnownHostsCommand is not rehearsed, and neither is one
whose configuration holds `Match exec` (reading that configuration, even by `ssh -G`, would run it). `ProxyJump`
is fine: ssh reaches the jump host itself.

The effective configuration of an ssh started on this machine is read by `ssh -G` (which connects nowhere),
once its files were read here and found without `Match exec`. An ssh started at a remote hop is judged by its
`-o` options only; what its own configuration runs there runs inside that host's wall.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import subprocess
from typing import Optional

from dfdoctor.launchline.hops import SSH_OPTS_WITH_ARG
from dfdoctor.lazy_re import compile_later

OFF = ["-o", "PermitLocalCommand=no"]  # every rehearsed ssh's first word on local commands
RUNS_LOCALLY = ("proxycommand", "knownhostscommand")
# ssh reads `Match=exec "cmd"` as `Match exec "cmd"` (one `=` may part a keyword from its arguments)
_MATCH_EXEC = compile_later(r"^\s*match(?=[\s=]).*?(?<=[\s=!])exec\b", re.IGNORECASE)
_INCLUDE = compile_later(r"^\s*include\s+(.+)$", re.IGNORECASE)
_KEY_VALUE = compile_later(r"\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)$", re.DOTALL)
_MAX_BYTES = 1 << 20
_MAX_FILES = 64
_G_TIMEOUT_S = 5.0
# the options `ssh -G` needs to find the effective configuration (not -E: it would append to a log file)
_G_KEEPS = set("FoJlp46")


def why_not(opts: tuple[str, ...], dest: str, local: bool, own_config: Optional[str] = None) -> Optional[str]:
    """Why this ssh hop would run a local command of the user's (None: it would not, with OFF given first).
    `opts`: the user's options as the line gives them (an option's value as its own word or glued); `local`: the
    ssh client runs on this machine; `own_config`: the configuration file dfdoctor's own ssh is given first
    (DFDOCTOR_SSH_CONFIG: the one read unless the line gives its own -F; whoever set it trusts it)."""
    given = options(opts)
    for key, value in given:
        if key in RUNS_LOCALLY and value.lower() != "none":
            return f"ssh to {dest} is given `-o {key}`: ssh would run `{value}` on the machine it starts on"
    named = [value for ch, value in _flags(opts) if ch == "F"]
    if not local or own_config and (not named or named[-1] == own_config):
        return None
    for path in _config_files(opts):
        if _has_match_exec(path):
            return (f"the ssh configuration {path} holds `Match exec`: ssh runs that command on this machine "
                    "while it reads its configuration")
    effective = _effective(tuple(_for_g(opts)), dest)
    if effective is None:
        return None  # ssh -G could not say: the hop's own failure (if any) is the rehearsal's to observe
    for key in RUNS_LOCALLY:
        value = effective.get(key, "none")
        if value.lower() != "none":
            return f"ssh to {dest} uses {key} `{value}` (its configuration): ssh would run it on this machine"
    return None


def options(opts: tuple[str, ...]) -> list[tuple[str, str]]:
    """The `-o Key=Value` / `-oKey Value` options given, as (key in lower case, value)."""
    out = []
    for flag, value in _flags(opts):
        m = _KEY_VALUE.match(value) if flag == "o" else None
        if m:
            out.append((m.group(1).lower(), m.group(2).strip().strip('"')))
    return out


def _flags(opts: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each option letter given, with its value ("" for a flag), as ssh's getopt reads them."""
    out, i = [], 0
    while i < len(opts):
        o = opts[i]
        i += 1
        if not o.startswith("-"):
            continue
        for j, ch in enumerate(o[1:], 1):
            if ch in SSH_OPTS_WITH_ARG:
                value = o[j + 1:]
                if not value and i < len(opts):
                    value, i = opts[i], i + 1
                out.append((ch, value))
                break
            out.append((ch, ""))
    return out


def _for_g(opts: tuple[str, ...]) -> list[str]:
    """The options that decide the effective configuration, each with its value."""
    return [w for ch, value in _flags(opts) if ch in _G_KEEPS for w in (f"-{ch}", *([value] if value else []))]


def _config_files(opts: tuple[str, ...]) -> list[str]:
    """The configuration files this ssh reads: the last -F given, else the user's and the system's; with every
    file they include (globs, relative to ~/.ssh or /etc/ssh)."""
    named = [value for ch, value in _flags(opts) if ch == "F" and value]
    home = os.path.expanduser("~/.ssh")
    roots = [(os.path.expanduser(named[-1]), home)] if named else [(os.path.join(home, "config"), home),
                                                                  ("/etc/ssh/ssh_config", "/etc/ssh")]
    seen: list[str] = []
    todo = list(roots)
    while todo and len(seen) < _MAX_FILES:
        path, base = todo.pop(0)
        if path in seen or not os.path.isfile(path):
            continue
        seen.append(path)
        for line in _lines(path):
            m = _INCLUDE.match(line)
            if not m:
                continue
            for pattern in m.group(1).split():
                pattern = os.path.expanduser(pattern.strip('"'))
                if not os.path.isabs(pattern):
                    pattern = os.path.join(base, pattern)
                todo += [(p, base) for p in sorted(glob.glob(pattern))]
    return seen


def _lines(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_BYTES).decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def _has_match_exec(path: str) -> bool:
    return any(_MATCH_EXEC.search(line) for line in _lines(path))


@functools.lru_cache(maxsize=64)
def _effective(opts: tuple[str, ...], dest: str) -> Optional[dict[str, str]]:
    """`ssh -G`'s effective configuration for `dest` (None where it could not say)."""
    try:
        p = subprocess.run(["ssh", "-G", *opts, "--", dest], capture_output=True, text=True,
                           timeout=_G_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    out: dict[str, str] = {}
    for line in p.stdout.splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key.lower(), value.strip())
    return out


def requests_tty(opts: tuple[str, ...], dest: str) -> Optional[bool]:
    """Whether an ssh with these options, given a remote command and typed in a terminal, asks for a terminal
    there by its configuration (`RequestTTY yes` or `force`, which `ssh -G` says `true` and `force`); None where
    `ssh -G` could not say."""
    conf = _effective(tuple(opts), dest)
    return None if conf is None else conf.get("requesttty", "auto") not in ("auto", "no", "false")
