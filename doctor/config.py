"""Project configuration: `[tool.dfdoctor]` in pyproject.toml, or `dfdoctor.toml`, in the job's cwd or the
first folder above it that has one (up to the project's root), never a file another user could have planted."""

from __future__ import annotations

import fnmatch
import math
import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from dfdoctor.errors import UsageError
from dfdoctor.model import CheckRecord
from dfdoctor.safefile import read_user_file

KNOWN_KEYS = {"fail-on", "timeout", "only", "skip", "silence", "checks", "watch", "keep-runs"}


class ConfigError(ValueError):
    """The config file exists but cannot be used; reported as one line with exit code 2."""


@dataclass(frozen=True)
class Silence:
    """A finding the team has accepted: by check id (glob) and/or cause id, always with a reason."""

    check: Optional[str]
    cause: Optional[str]
    reason: str

    def matches(self, rec: CheckRecord) -> bool:
        if self.check and not fnmatch.fnmatchcase(rec.id, self.check):
            return False
        if self.cause and rec.cause != self.cause:
            return False
        return True


@dataclass
class Config:
    """The settings found, and the file they came from (None when there is none)."""

    path: Optional[Path] = None
    values: dict[str, Any] = field(default_factory=dict)
    silences: list[Silence] = field(default_factory=list)
    # "FILE: why" for each config file the walk passed by without reading it (another user's, or above a folder
    # others may write), so the report says why a file the user sees was not used.
    skipped: list[str] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def load(cwd: Path) -> Config:
    """The project's settings: from `cwd` up to the project root, the first folder with a `dfdoctor.toml`
    (preferred) or a pyproject.toml that has `[tool.dfdoctor]`, as ruff and pytest find theirs. The walk stops at
    the folder holding `.git` (the checkout's root) or at the file system's root.

    Git's answer to CVE-2022-24765, for the same reason (a file planted in a parent folder others may write would
    silence every check, skip them, or prune the user's runs): a file not owned by the user or root is skipped,
    and the walk stops at a folder others may write (world- or group-writable, or another user's), after its own
    files. Each skipped file is named in `Config.skipped` with the reason."""
    skipped: list[str] = []
    for folder in _upwards(cwd):
        found = _read(folder, skipped)
        if found is not None:
            found.skipped = skipped
            return found
        if (folder / ".git").exists():
            break
        writers = _others_may_write(folder)
        if writers:
            above = [n for n in ("dfdoctor.toml", "pyproject.toml") for f in folder.parents if (f / n).is_file()]
            if above:
                skipped.append(f"not looked above {folder}: {writers}")
            break
    return Config(skipped=skipped)


def _upwards(cwd: Path) -> list[Path]:
    try:
        start = cwd.resolve()
    except OSError:
        start = cwd.absolute()
    return [start, *start.parents]


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _others_may_write(folder: Path) -> Optional[str]:
    """Why users other than this one (or root) may write into `folder`, or None when they may not."""
    try:
        st = folder.stat()
    except OSError:
        return None
    if not _trusted(st.st_uid):
        return f"it belongs to {_owner(st.st_uid)}"
    if st.st_mode & stat.S_IWOTH:
        return "everyone may write it" + (" (sticky, as /tmp)" if st.st_mode & stat.S_ISVTX else "")
    if st.st_mode & stat.S_IWGRP and st.st_gid != os.getegid():
        return f"group {st.st_gid} may write it"
    return None


def _foreign(path: Path) -> Optional[str]:
    """Why `path` may have been planted by another user: it (or the symlink that names it) is not this user's
    nor root's. None when it is trusted."""
    try:
        link, target = path.lstat(), path.stat()
    except OSError:
        return None
    for st in (link, target):
        if not _trusted(st.st_uid):
            return f"owned by {_owner(st.st_uid)}, not by you or root"
    return None


def _read(folder: Path, skipped: list[str]) -> Optional[Config]:
    """The settings of one folder, or None when it has none (a pyproject.toml without [tool.dfdoctor], or only
    another user's files, which are added to `skipped`)."""
    for name, table in (("dfdoctor.toml", None), ("pyproject.toml", ("tool", "dfdoctor"))):
        path = folder / name
        if not path.is_file():
            continue
        foreign = _foreign(path)
        if foreign:
            skipped.append(f"{path}: {foreign}")
            continue
        import tomllib  # here: every command looks for a config file, and most folders have none

        try:
            doc = tomllib.loads(read_user_file(path, f"config {path}", pipes=False).decode("utf-8"))
        except UsageError as exc:
            raise ConfigError(str(exc)) from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        tool = doc.get("tool")
        if tool is not None and not isinstance(tool, dict):
            raise ConfigError(f"{path}: tool must be a table, not {_shown(tool)}")
        values = (tool or {}).get("dfdoctor", doc if table is None else None)
        if values is None:
            continue
        return _validated(path, values)
    return None


def _validated(path: Path, values: Any) -> Config:
    """Every key of the table checked for its type and range: input dfdoctor does not understand is exit 2,
    never read some other way (a string `skip = "cuda.*"` is not a list of its letters)."""
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: [tool.dfdoctor] must be a table")
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})")
    for key, (ok, expects) in _TOP.items():
        if key in values and not ok(values[key]):
            raise ConfigError(f"{path}: {key} must be {expects}, not {_shown(values[key])}")
    silences = []
    for i, entry in enumerate(values.get("silence", [])):
        if not isinstance(entry, dict) or not (entry.get("check") or entry.get("cause")):
            raise ConfigError(f"{path}: silence[{i}] needs a check and/or a cause")
        for k, v in entry.items():
            if k not in ("check", "cause", "reason"):
                raise ConfigError(f"{path}: silence[{i}] has an unknown key {k} (known: cause, check, reason)")
            if not isinstance(v, str):
                raise ConfigError(f"{path}: silence[{i}].{k} must be a string, not {_shown(v)}")
        if not entry.get("reason", "").strip():
            raise ConfigError(f"{path}: silence[{i}] needs a reason (say why the team accepts it)")
        silences.append(Silence(entry.get("check") or None, entry.get("cause") or None, entry["reason"].strip()))
    for check_id, table in values.get("checks", {}).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: checks.\"{check_id}\" must be a table of settings, not {_shown(table)}")
        for name, v in table.items():
            rule = _PER_CHECK.get((check_id, name)) or _PER_CHECK.get(("*", name))
            if rule is not None and not rule[0](v):
                raise ConfigError(f"{path}: checks.\"{check_id}\".{name} must be {rule[1]}, not {_shown(v)}")
    return Config(path, dict(values), silences)


def _shown(value: Any) -> str:
    """A value as the error names it: TOML's words for its type, then the value itself (cut short)."""
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: Any) -> bool:
    return _number(v) and v > 0


def _non_negative(v: Any) -> bool:
    return _number(v) and v >= 0


def _whole(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and x for x in v)


def _one_of(*words: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in words), " or ".join(f'"{w}"' for w in words)


_POSITIVE = (_positive, "a number of seconds greater than 0")
# key: (accepts(value), what it expects, in the words of the error)
_TOP: dict[str, tuple[Callable[[Any], bool], str]] = {
    "fail-on": _one_of("error", "warn"),
    "timeout": _POSITIVE,
    "only": (_strings, 'an array of check-id globs, e.g. ["cuda.*"]'),
    "skip": (_strings, 'an array of check-id globs, e.g. ["cuda.*"]'),
    "silence": (lambda v: isinstance(v, list), "an array of tables {check, cause, reason}"),
    "checks": (lambda v: isinstance(v, dict), 'a table of check ids ([tool.dfdoctor.checks."log.writable"])'),
    "watch": (_non_negative, "a number of seconds, 0 or more"),
    "keep-runs": (_whole(1), "a whole number, 1 or more"),
}
# The settings of the built-in checks; ("*", name) holds for every check. A plugin's own settings pass as
# written (its check reads them).
_PER_CHECK: dict[tuple[str, str], tuple[Callable[[Any], bool], str]] = {
    ("*", "timeout"): _POSITIVE,
    ("log.writable", "min_free_mb"): (_non_negative, "a number of MiB, 0 or more"),
    ("log.writable", "warn_free_mb"): (_non_negative, "a number of MiB, 0 or more"),
    ("log.writable", "min_free_inodes"): (_whole(0), "a whole number, 0 or more"),
    ("cuda.init", "expect_gpu"): (lambda v: isinstance(v, bool), "true or false"),
    ("cuda.nccl", "expect_gpu"): (lambda v: isinstance(v, bool), "true or false"),
    ("cuda.nccl", "backend"): _one_of("nccl", "gloo"),
    ("cuda.nccl", "world_size"): (_whole(1), "a whole number, 1 or more"),
    ("cuda.nccl", "hang_rank"): (_whole(0), "a rank: a whole number, 0 or more"),
    ("cuda.nccl", "fail_rank"): (_whole(0), "a rank: a whole number, 0 or more"),
    ("compile.race", "reproduce"): _one_of("auto", "always", "never"),
    ("compile.race", "runs"): (_whole(1), "a whole number, 1 or more"),
    ("compile.race", "threads"): (_whole(1), "a whole number, 1 or more"),
    ("compile.race", "deadline"): _POSITIVE,
    ("compile.race", "cache_days"): (_non_negative, "a number of days, 0 or more"),
    ("compile.race", "backend"): _one_of("race", "inductor", "flex"),
    ("compile.race", "device"): (lambda v: isinstance(v, str) and bool(v), 'a device name, e.g. "cpu"'),
    ("persistence.session", "strategies"): (_strings, 'an array of strategy names, e.g. ["tmux"]'),
}


def apply_silences(records: list[CheckRecord], silences: list[Silence]) -> None:
    """Mark records that match a silence; they stay listed but no longer decide the exit code."""
    for rec in records:
        if rec.status.value in ("ok", "skip"):
            continue
        for s in silences:
            if s.matches(rec):
                rec.silenced = s.reason
                break
