"""What the training interpreter has installed, observed once and reused while nothing it reads has changed.

deps.requirements' probe starts a fresh interpreter and reads every installed distribution's metadata: about
0.14 s of CPU on a 51-distribution venv, a tenth of `import torch` (round 11), for an answer that stays the same
until something is installed or removed. Installing or removing anything (pip, conda, a `.pth` file, an editable
checkout's dist-info) creates or deletes an entry in a folder on the interpreter's import path, which changes
that folder's mtime; rewriting a `.pth` file in place changes none, so each `.pth` file's bytes are kept too (a
hash). So the answer is kept together with the mtime of each of those folders and the hash of each `.pth` file,
and it is reused only while every one is still as it was, for the same interpreter file, request and
environment, and for at most MAX_AGE_S. Only this machine's interpreter: a target's folders are not stat-ed from here.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Callable, Optional

from dfdoctor import cache
from dfdoctor.command import ProbeOutcome
from dfdoctor.probe import run_probe

CACHE_KIND = "deps-installed"
MAX_AGE_S = 24 * 3600.0
# What decides the interpreter's import path and how it reads it (HOME: the user's site folder).
PATH_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
                  "PYTHONPLATLIBDIR", "HOME")


def ask(ctx, request: dict[str, Any], timeout: float) -> tuple[ProbeOutcome, Optional[float]]:
    """The probe's outcome, and when it was observed if it was reused (None: observed now)."""
    key = _key(ctx, request)
    hit = cache.lookup(CACHE_KIND, key, MAX_AGE_S) if key else None
    if hit and isinstance(hit[0], dict) and unchanged(hit[0].get("path_state")) and \
            pth_unchanged(hit[0].get("pth_state")):
        return ProbeOutcome(argv=[], returncode=0, stdout="", stderr="", duration_s=0.0, payload=hit[0]), hit[1]
    out = run_probe(ctx, "deps_probe.py", request=request, timeout=timeout)
    if key and out.returncode == 0 and not out.timed_out and out.payload and out.payload.get("path_state") \
            and not out.payload.get("error"):
        cache.store(CACHE_KIND, key, out.payload)
    return out, None


def _key(ctx, request: dict[str, Any]) -> Optional[dict[str, Any]]:
    """What the answer depends on besides the folders' contents; None where it cannot be pinned down."""
    if not ctx.target.runs_here or not ctx.python or not os.path.isabs(ctx.python):
        return None
    try:
        st = os.stat(ctx.python)  # follows a venv's symlink: a rebuilt Python is a new file
    except OSError:
        return None
    return {"python": ctx.python, "file": [os.path.realpath(ctx.python), st.st_ino, st.st_size, st.st_mtime_ns],
            "cwd": str(ctx.cwd), "env": {k: ctx.env.get(k) for k in PATH_VARIABLES}, "request": request}


def unchanged(path_state: Any) -> bool:
    """Whether every folder the probe saw on the import path (and each it saw missing) is still as it was."""
    return isinstance(path_state, list) and bool(path_state) and _all_as_noted(path_state,
                                                                                 lambda p: os.stat(p).st_mtime_ns)


def pth_unchanged(pth_state: Any) -> bool:
    """Whether every `.pth` file the probe read on the import path still reads the same (a `.pth` rewritten in
    place changes no folder's mtime, yet moves what is importable). An answer without them is not reused."""
    return isinstance(pth_state, list) and _all_as_noted(pth_state, _digest)


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha1(f.read(1 << 20)).hexdigest()


def _all_as_noted(state: list, now_of: Callable[[str], Any]) -> bool:
    """Whether each (path, value) noted still reads the same by `now_of` (None for a path now missing); a malformed
    item or an unreadable path is a change."""
    for item in state:
        try:
            path, noted = item
            now = now_of(path)
        except FileNotFoundError:
            now = None
        except (OSError, TypeError, ValueError):
            return False
        if now != noted:
            return False
    return True


def age_words(stored_at: float) -> str:
    """`read 3 min ago`, for the report."""
    age = max(0.0, time.time() - stored_at)
    if age < 90:
        return f"read {age:.0f} s ago"
    if age < 5400:
        return f"read {age / 60:.0f} min ago"
    return f"read {age / 3600:.1f} h ago"
