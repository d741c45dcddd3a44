"""Project configuration: `[tool.dfdoctor]` in pyproject.toml, or `dfdoctor.toml`, in the job's cwd."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import tomllib
from dfdoctor.model import CheckRecord

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

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def load(cwd: Path) -> Config:
    """Read `dfdoctor.toml` (preferred) or pyproject's `[tool.dfdoctor]` from `cwd`."""
    for name, table in (("dfdoctor.toml", None), ("pyproject.toml", ("tool", "dfdoctor"))):
        path = cwd / name
        if not path.is_file():
            continue
        try:
            doc = tomllib.loads(path.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        if table is None:
            values = doc.get("tool", {}).get("dfdoctor", doc)
        else:
            values = doc.get("tool", {}).get("dfdoctor")
            if values is None:
                continue
        return _validated(path, values)
    return Config()


def _validated(path: Path, values: Any) -> Config:
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: [tool.dfdoctor] must be a table")
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})")
    if values.get("fail-on", "error") not in ("error", "warn"):
        raise ConfigError(f"{path}: fail-on must be \"error\" or \"warn\", not {values['fail-on']!r}")
    silences = []
    for i, entry in enumerate(values.get("silence", []) or []):
        if not isinstance(entry, dict) or not (entry.get("check") or entry.get("cause")):
            raise ConfigError(f"{path}: silence[{i}] needs a check and/or a cause")
        if not str(entry.get("reason", "")).strip():
            raise ConfigError(f"{path}: silence[{i}] needs a reason (say why the team accepts it)")
        silences.append(Silence(entry.get("check"), entry.get("cause"), str(entry["reason"]).strip()))
    checks = values.get("checks", {})
    if not isinstance(checks, dict):
        raise ConfigError(f"{path}: [tool.dfdoctor.checks] must be a table of check ids")
    return Config(path, dict(values), silences)


def apply_silences(records: list[CheckRecord], silences: list[Silence]) -> None:
    """Mark records that match a silence; they stay listed but no longer decide the exit code."""
    for rec in records:
        if rec.status.value in ("ok", "skip"):
            continue
        for s in silences:
            if s.matches(rec):
                rec.silenced = s.reason
                break
