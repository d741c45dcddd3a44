"""Two checkouts measured side by side, alternated round by round (a loaded machine slows both alike): the loop
bench/command_cpu.py and bench/launch_tree_cpu.py share. Each round gives each checkout a work folder holding
`job.py` and its own state and cache folders, and calls `one_round(tree, work, env, samples)`, which appends its
figures to `samples` ({case: [figures]}, one per checkout); the order of the two flips each round."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def alternated(trees: dict[str, Path], rounds: int, job: str, one_round: Callable, prefix: str
               ) -> tuple[dict[str, dict[str, list]], list[float]]:
    """({checkout: {case: [figures]}}, the 1-minute load before the first round and after each)."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    res: dict[str, dict[str, list]] = {name: {} for name in trees}
    loads = [os.getloadavg()[0]]
    try:
        for i in range(rounds):
            for name, tree in (list(trees.items()) if i % 2 else list(reversed(trees.items()))):
                work = scratch / name
                work.mkdir(exist_ok=True)
                (work / "job.py").write_text(job)
                env = dict(os.environ, NO_COLOR="1", XDG_STATE_HOME=str(scratch / f"state-{name}"),
                           XDG_CACHE_HOME=str(scratch / f"cache-{name}"))
                one_round(tree, work, env, res[name])
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return res, loads
