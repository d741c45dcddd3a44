"""dfdoctor's cache folder (~/.cache/dfdoctor, or $XDG_CACHE_HOME/dfdoctor): answers worth keeping between runs.

A cache entry is one JSON file named by the hash of its key. Reading or writing the cache never fails a run: a
missing, unreadable, stale or corrupt entry is simply not there, and a cache that cannot be written is skipped.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor.redact import Redactor
from dfdoctor.safefile import write_atomically


def cache_dir() -> Path:
    """The base folder (not created here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dfdoctor"


def private_dir(path: Path) -> Path:
    """Create `path` readable by this user only (0700), and the cache folder above it the same way (an older
    cache folder left 0755 is tightened); entries are 0600 by mkstemp."""
    path, base = Path(path), cache_dir()
    below = [p for p in reversed([path, *path.parents]) if p == base or base in p.parents]
    if not below:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path
    base.parent.mkdir(parents=True, exist_ok=True)  # ~/.cache is the user's, with the user's mode
    for p in below:
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:
            pass
    st = base.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(base, 0o700)
    return path


def key_of(parts: Any) -> str:
    """A stable hash of JSON-able key parts."""
    import hashlib  # here: a check or report that reads no cache does not load OpenSSL (20 M instructions)
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _path(kind: str, key: Any) -> Path:
    return cache_dir() / kind / f"{key_of(key)}.json"


def lookup(kind: str, key: Any, max_age_s: float) -> Optional[tuple[Any, float]]:
    """The value stored under `key` and when (epoch seconds), if it is younger than max_age_s."""
    if max_age_s <= 0:
        return None
    try:
        entry = json.loads(_path(kind, key).read_text())
        stored = float(entry["stored_at"])
        if entry.get("key") != json.loads(json.dumps(key, default=str)) or time.time() - stored > max_age_s:
            return None
        return entry["value"], stored
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(kind: str, key: Any, value: Any) -> Optional[Path]:
    """Keep `value` under `key` (atomically: a reader never sees half an entry); None if it cannot be written."""
    path = _path(kind, key)
    value = Redactor.from_env(dict(os.environ)).value(value)  # what the cache keeps is masked like any output
    try:
        text = json.dumps({"key": key, "stored_at": time.time(), "value": value}, default=str)
        private_dir(path.parent)
        write_atomically(path, text, private=True)
        return path
    except (OSError, TypeError, ValueError):
        return None
