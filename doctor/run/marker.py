"""The marker file that says "dfdoctor made this run folder": a name and a content a user's own folder does not
have by chance. `status`, `report` and the pruning of old runs only ever touch folders that carry it.

A dfdoctor process that works on a run folder holds a shared lock on its marker (`hold`) until it exits: the
pruning of another launch in the same folder leaves it alone (`in_use`), even once the job and its recorder
have ended and the report is still being written."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Optional

from dfdoctor.agent.names import MARKER as NAME
from dfdoctor.agent.names import MARKER_TEXT as TEXT


def write(run_dir: Path, run_id: str) -> None:
    """Mark `run_dir` as the folder of run `run_id` (a new file: an existing one is never overwritten)."""
    fd = os.open(Path(run_dir) / NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (TEXT + run_id).encode())
    finally:
        os.close(fd)


def run_id(run_dir: Path) -> Optional[str]:
    """The id the marker of `run_dir` names, or None when the folder is not a dfdoctor run folder."""
    try:
        with open(Path(run_dir) / NAME, "rb") as f:
            text = f.read(256).decode("utf-8", "replace")
    except OSError:
        return None
    return text[len(TEXT):] if text.startswith(TEXT) else None


_HELD: dict[str, int] = {}  # run folder -> the fd whose shared lock this process holds until it exits


def hold(run_dir: Path) -> None:
    """Hold `run_dir` for the rest of this process (a shared flock on its marker; flock ends with the process,
    however it ends). A folder whose marker cannot be opened is not held."""
    key = os.path.realpath(run_dir)
    if key in _HELD:
        return
    try:
        fd = os.open(Path(run_dir) / NAME, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    _HELD[key] = fd


def in_use(run_dir: Path) -> bool:
    """Whether a dfdoctor process (this one included) holds `run_dir` now."""
    try:
        fd = os.open(Path(run_dir) / NAME, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
