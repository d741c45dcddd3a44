"""The marker file that says "dfdoctor made this run folder": a name and a content a user's own folder does not
have by chance. `status`, `report` and the pruning of old runs only ever touch folders that carry it."""

from __future__ import annotations

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
