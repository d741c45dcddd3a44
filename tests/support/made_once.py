"""Something several tests read, made once per run of the suite and shared by its xdist workers: a folder made by
the first worker that asks for it (the others wait for it), under the session's temporary folder, never kept for a
later run. For what costs CPU to make and is the same for each test that reads it (a `check` whose report two tests
assert on, data a project's own script makes)."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable


def session_folder(tmp_path_factory) -> Path:
    """The session's temporary folder, shared by its xdist workers (each worker's own is a folder inside it), or
    this process's own one without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(where: Path, make: Callable[[Path], None]) -> Path:
    """`where`, made by `make(where)` in the first worker that asks for it; the others wait for it to be done. A
    `make` that raised left no mark: the next worker to ask makes it again (and fails its own test the same way)."""
    with open(f"{where}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when `make` fails
        done = Path(f"{where}.done")
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            make(where)
            done.touch()
    return where
