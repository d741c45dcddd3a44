"""dfdoctor's cache folder (~/.cache/dfdoctor, or $XDG_CACHE_HOME/dfdoctor): answers worth keeping between runs.

A cache entry is one JSON file named by the hash of its key. Reading or writing the cache never fails a run: a
missing, unreadable, stale or corrupt entry is simply not there, and a cache that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Optional


def cache_dir() -> Path:
    """The base folder (not created here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dfdoctor"


def key_of(parts: Any) -> str:
    """A stable hash of JSON-able key parts."""
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "stored_at": time.time(), "value": value}, f, default=str)
        os.replace(tmp, path)
        return path
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return None
