"""Cleanup a check's worker registers before it makes something that must not outlive it (a rehearsal's
sentinel, folder, renamed logs, tmux server), for the parent to run when it kills that worker (Ctrl-C, SIGTERM,
a deadline): a SIGKILLed worker runs no `finally`.

A registration is one file under a private folder, named by the worker's pid, holding the argv lists to run;
the worker removes it once it cleaned up itself.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

CLEAN_S = 8.0  # one cleanup command (a session through the line's hops) at most


def _folder() -> Optional[Path]:
    """The private folder, or None when it is not ours alone: what is in it is run, so no one else may write it
    (a shared /tmp: another user could plant a folder, a symlink, or a file in it)."""
    d = Path(tempfile.gettempdir()) / f"dfdoctor-leftovers-{os.getuid()}"
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return d


def register(key: str, argvs: list[list[str]], cwd: Optional[str] = None) -> Optional[Path]:
    """Record what to run if this process is killed before `done(path)` (None: no private folder to record in)."""
    d = _folder()
    if d is None:
        return None
    path = d / f"{os.getpid()}-{key}.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"argvs": argvs, "cwd": cwd}))
    except OSError:
        return None
    return path


def done(path: Optional[Path]) -> None:
    """The process cleaned up itself: nothing to run for it."""
    if path is None:
        return
    try:
        path.unlink()
    except OSError:
        pass


def clean(pid: int) -> None:
    """Run what a killed process `pid` registered (in parallel, each bounded), then forget it."""
    d = _folder()
    if d is None:
        return
    try:
        found = [p for p in d.glob(f"{pid}-*.json") if os.lstat(p).st_uid == os.getuid()]
    except OSError:
        return
    runs = []
    for path in found:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            rec = {"argvs": []}
        runs += [(argv, rec.get("cwd")) for argv in rec.get("argvs", [])]
        done(path)
    if runs:
        # imported here: concurrent.futures brings logging, 0.003 CPU-s of every start of the runner's users, and
        # only a run that left cleanups behind gets this far
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            list(pool.map(lambda r: run_quietly(*r), runs))


def run_quietly(argv: list[str], cwd: Optional[str] = None) -> str:
    """One cleanup command: no input, bounded, its words returned (never raises)."""
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=CLEAN_S, cwd=cwd,
                           start_new_session=True)
        return p.stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return ""
