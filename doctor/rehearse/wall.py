"""The rehearsal's second wall (shared/REHEARSAL.md): where the line runs as root on Linux with `unshare`, it runs
in a private mount namespace where every writable mount that place can see (read from its own mountinfo: /,
/tmp, /var, /dev/shm, /home, /srv, ...) is covered by an overlay with a throw-away upper layer, so that a write
the analysis missed lands there, never in anything real (wall.sh). The rehearsal's own private folder stays the real one, and its renamed files are
carried out for the look (surface.sh); sweep.sh removes the upper layers with the rest.

A wall stands at each place the line runs: this machine (around the shell that runs the line, runner.py), each
ssh host (around the remote command, by the same login shell) and each container a hop enters (around the words
it execs), rewrite.py. Where one cannot stand (not root, no unshare, a container that refuses mount namespaces, a
quoting that cannot carry it) the line runs there as it would have, and the evidence says so (`evidence`).

`plan` below is a rewrite.Plan, not imported by name: rewrite.py imports this module to put the wall into hops.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Optional

from dfdoctor.shellquote import join

HERE = Path(__file__).resolve().parent
# without its comments: it travels inside the line, once per hop, quoted again at each
WALL = "\n".join(ln for ln in (HERE / "wall.sh").read_text().splitlines() if not ln.lstrip().startswith("#"))
SURFACE = (HERE / "surface.sh").read_text()


def folder(tag: str, depth: int = 0) -> str:
    """Where the wall keeps its views and upper layers at the place `depth` hops away."""
    return f"/dev/shm/dfdoctor-rh-{tag}.wall{depth}"


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


def prefix(plan, chain: tuple) -> str:
    """The words that run what follows them inside the wall at the place `chain` reaches (shell text)."""
    return join(["sh", "-c", WALL, "sh", plan.tag, str(len(chain)), *_strict(plan), "--"])


def argv(plan, command: list[str]) -> list[str]:
    """`command`, to be run at this machine inside the wall (as itself where the wall cannot stand)."""
    return ["sh", "-c", WALL, "sh", plan.tag, "0", *_strict(plan), "--", *command]


def _strict(plan) -> list[str]:
    """`strict` where the line hides code the reader did not run: no wall there, no line run there."""
    return ["strict"] if plan.strict or plan.hides else []


def unwalled(plan) -> Optional[str]:
    """Before the line runs: why a line that hides code cannot be rehearsed behind a wall at every place (None:
    it can be tried, or it hides nothing)."""
    if not plan.hides:
        return None
    why = why_not_here()
    if why:
        return f"no wall can stand on this machine ({why})"
    bare = next((c for c in _chains(plan) if c and c not in plan.walls), None)
    return f"the line's quoting cannot carry a wall to {bare[-1].where}" if bare else None


def refused(plan, said: dict[str, str]) -> Optional[str]:
    """Why the line was not rehearsed at a place whose wall could not stand (wall.sh's `strict`), if so."""
    if not (plan.strict or plan.hides):
        return None
    for depth, seen in sorted(said.items()):
        if seen.startswith("off"):
            where = next((c[-1].where for c in _chains(plan) if c and str(len(c)) == depth), "your machine")
            return (f"no wall could stand at {where} ({seen[4:].strip() or 'it could not be set up'}) to hold "
                    f"what the reading of the line may miss, and the line hides code: "
                    f"{(plan.hides or ['a command the reader did not run'])[0]}")
    return None


def _chains(plan) -> list[tuple]:
    """Every place the line runs at: this machine, and each hop's chain the job, a log or a multiplexer reaches."""
    chains: dict[tuple, None] = {(): None}
    for chain in [plan.job.chain if plan.job else (), *(log.chain for log in plan.logs),
                  *(c for c, _ in plan.multiplexers)]:
        chains.update({tuple(chain[:i]): None for i in range(1, len(chain) + 1)})
    return list(chains)


def evidence(plan, said: dict[str, str]) -> str:
    """One line of evidence: at each place the line ran, what the wall covered or why there was none. `said`:
    depth -> what sweep.sh found there ("up FOLDERS" or "off WHY")."""
    parts = []
    for chain in _chains(plan):
        where = chain[-1].where if chain else "your machine"
        seen = said.get(str(len(chain)), "") if not chain or chain in plan.walls else ""
        if seen.startswith("up "):
            parts.append(f"{where}: up, over {', '.join(seen[3:].split())}")
            continue
        if seen.startswith("off"):
            why = seen[4:].strip() or "it could not be set up"
        elif not chain:
            why = why_not_here() or "it did not report"
        elif chain in plan.walls:
            why = "it did not report: the line may not have got there"
        else:
            why = "the line's quoting there cannot carry it"
        parts.append(f"{where}: rehearsed without a wall ({why})")
    return "second wall (writes the analysis missed go to a throw-away overlay): " + "; ".join(parts)
