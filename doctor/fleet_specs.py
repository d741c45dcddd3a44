"""Which targets one `check` is for: every --target, then a --targets-file's, and how many are checked at once by
default. Apart from `fleet.py`, whose pipeline (forked targets, psutil, the runner's lanes) only several targets
need: every `check` reads its targets, and importing the fleet for that was 0.01-0.02 CPU-s of each (issue 45)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from dfdoctor.errors import UsageError
from dfdoctor.safefile import read_user_file

DEFAULT_PARALLEL = 8


def read_targets_file(path: str) -> list[str]:
    """One target spec per line; blank lines and `#` comments ignored. Unreadable, not a file or FIFO, too large,
    or a FIFO no one writes to: a usage error."""
    data = read_user_file(Path(path), f"--targets-file {path}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--targets-file {path}: cannot read it (not UTF-8: {exc})") from None
    specs = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            specs.append(line)
    if not specs:
        raise UsageError(f"--targets-file {path}: names no target (one spec per line, # for comments)")
    return specs


def target_specs(given: tuple[str, ...], targets_file: Optional[str]) -> list[str]:
    """Every --target, then the file's, in order; a spec given twice counts once."""
    specs = list(given) + (read_targets_file(targets_file) if targets_file else [])
    seen: list[str] = []
    for s in specs:
        if s not in seen:
            seen.append(s)
    return seen or ["local"]
