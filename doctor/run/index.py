"""The user's index of runs: where each run folder is, so `status` and `report` find a run by its id (or a
prefix of it) from any folder, and a plain `status` in a folder with no runs takes the user's latest.

One JSON line per run in `$XDG_STATE_HOME/dfdoctor/runs.jsonl` (default `~/.local/state/dfdoctor/`): the run's
id, its folder, the folder it was launched from and when. Never the command, its environment or its output,
which may carry secrets: those stay in the run folder, masked. A line is trusted only while the folder it
names still carries the marker of that very run, so a stale or edited index can point nowhere else.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor.run import marker

INDEX = "runs.jsonl"
KEEP = 500  # lines kept when the index is trimmed (it is trimmed once it holds twice as many)


def state_dir() -> Path:
    """`$XDG_STATE_HOME/dfdoctor`, else `~/.local/state/dfdoctor` (a relative XDG path is ignored, as the
    XDG spec says)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "dfdoctor"


def record(run_id: str, folder: Path, cwd: Path) -> None:
    """Add a new run to the index. Best effort: a launch never fails because the index cannot be written."""
    line = json.dumps({"id": run_id, "dir": str(Path(folder).absolute()), "cwd": str(Path(cwd).absolute()),
                       "at": time.time()}) + "\n"
    try:
        base = state_dir()
        base.parent.mkdir(parents=True, exist_ok=True)
        base.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(base / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line.encode())
        if os.fstat(fd).st_size > KEEP * 2 * 200:  # about twice KEEP lines: keep the newest KEEP
            _trim(base / INDEX)
    except OSError:
        pass
    finally:
        os.close(fd)  # releases the lock


def _trim(path: Path) -> None:
    """Keep the newest KEEP lines (the caller holds the index's lock; the file is rewritten in place so the
    lock, held on this very file, still covers it)."""
    with open(path, "r+", encoding="utf-8", errors="replace") as f:
        lines = f.readlines()[-KEEP:]
        f.seek(0)
        f.writelines(lines)
        f.truncate()


def entries() -> list[dict[str, Any]]:
    """The index's runs, oldest first; unreadable lines are passed over."""
    try:
        text = (state_dir() / INDEX).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("id"), str) and isinstance(doc.get("dir"), str):
            out.append(doc)
    return out


def _live(doc: dict[str, Any]) -> Optional[Path]:
    """The run folder of an index line while it still is that run's folder."""
    path = Path(doc["dir"])
    return path if marker.run_id(path) == doc["id"] else None


def find(ref: str) -> list[Path]:
    """The run folders whose id is `ref` or starts with it (an exact id wins over longer ones)."""
    found: dict[str, Path] = {}
    for doc in entries():
        if doc["id"].startswith(ref):
            path = _live(doc)
            if path is not None:
                found[doc["id"]] = path
    if ref in found:
        return [found[ref]]
    return list(found.values())


def latest(cwd: Optional[Path] = None) -> Optional[Path]:
    """The user's latest run whose folder still exists; with `cwd`, the latest launched from that folder."""
    want = str(Path(cwd).absolute()) if cwd is not None else None
    for doc in reversed(entries()):
        if want is not None and doc.get("cwd") != want:
            continue
        path = _live(doc)
        if path is not None:
            return path
    return None
