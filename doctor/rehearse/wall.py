"""The rehearsal's second wall (shared/REHEARSAL.md): where the line runs as root on Linux with `unshare`, it runs
in a private mount namespace whose user folders (its cwd, its redirects' and script's folders, $HOME, /tmp) are
covered by an overlay with a throw-away upper layer, so that a write the analysis missed lands there, never in
the user's files (wall.sh). The rehearsal's own private folder stays the real one, and its renamed files are
carried out for the look (surface.sh); sweep.sh removes the upper layers with the rest.

Built at this machine, around the shell that runs the line. The hops the line makes (ssh, pct exec, docker exec)
run beyond it without a wall of their own: their writes are guarded by the analysis alone, and the evidence says
so.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
from pathlib import Path
from typing import Optional

from dfdoctor.rehearse.rewrite import Plan

HERE = Path(__file__).resolve().parent
WALL = (HERE / "wall.sh").read_text()
SURFACE = (HERE / "surface.sh").read_text()


def folder(tag: str) -> str:
    """Where the wall keeps its views and upper layers at a place."""
    return f"/dev/shm/dfdoctor-rh-{tag}.wall"


def why_not_here() -> Optional[str]:
    """Why no wall can stand on this machine (None: it can be tried)."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "dfdoctor does not run as root"
    if not shutil.which("unshare"):
        return "no `unshare` (util-linux)"
    if not os.path.isdir("/dev/shm"):
        return "no /dev/shm"
    return None


def folders(plan: Plan, chain: tuple = ()) -> list[str]:
    """The folders the line touches at the place `chain` reaches, as the line names them (relative ones are
    relative to where its session starts; wall.sh resolves them there): where the job starts and its script, the
    folders its redirects write into."""
    out = []
    job = plan.job
    if job is not None and job.chain == chain:
        if job.cwd:
            out.append(job.cwd)
        if job.script and job.script_is_file:
            out.append(_join(job.cwd, posixpath.dirname(job.script) or "."))
    for log in plan.logs:
        if log.chain == chain and not log.in_home:
            out.append(_join(log.cwd, posixpath.dirname(log.renamed) or "."))
    return list(dict.fromkeys(d for d in out if d))


def _join(cwd: Optional[str], path: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, path)) if cwd else path


def argv(plan: Plan, command: list[str]) -> list[str]:
    """`command`, to be run at this machine inside the wall (as itself where the wall cannot stand)."""
    return ["sh", "-c", WALL, "sh", plan.tag, *folders(plan), "--", *command]


def state(tag: str) -> str:
    """One line of evidence: what the wall at this machine covered, or why it did not stand."""
    why = why_not_here()
    if why:
        return f"no second wall on your machine ({why}): only the analysis kept the line from your files"
    w = Path(folder(tag))
    off = _read(w / "off")
    if off or not (w / "on").exists():
        return (f"no second wall on your machine ({off or 'it could not be set up'}): only the analysis kept the "
                "line from your files")
    covered = [ln.partition(" ")[2] for ln in _read(w / "map").splitlines() if ln.strip()]
    return (f"second wall on your machine: the line ran in a private mount namespace; its writes to "
            f"{', '.join(covered)} went to a throw-away overlay (hops beyond this machine have no wall of their "
            "own)")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
