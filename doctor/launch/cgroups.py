"""The memory cgroups that `--memory-limit` runs left behind, removed by `dfdoctor status`.

The recorder removes its `dfdoctor-RUN` cgroup when the job ends; it cannot when it is SIGKILLed, nor while a
process of the job is still in it. `status` sweeps the empty ones: those of this folder's runs that ended at once,
any other dfdoctor-* one once it is a minute old (doctor/agent/memory.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dfdoctor.agent.memory import memory_cgroup, sweep_cgroups
from dfdoctor.agent.names import SPEC
from dfdoctor.run import record
from dfdoctor.run.folder import list_runs


def sweep_left_cgroups(cwd: Path) -> list[str]:
    """Remove the empty cgroups ended runs left (here and under the cgroups this folder's runs used)."""
    parents = [memory_cgroup()[1]]
    ended = set()
    for run_dir in list_runs(cwd):
        if _asked_no_limit(run_dir):
            continue
        run = record.load(run_dir)
        if run.is_remote:
            continue
        made = run.first("memory-limit")
        if made and made.get("cgroup"):
            parents.append(os.path.dirname(made["cgroup"]))
            if run.finished or not run.recorder_alive():
                ended.add(str(run.id))
    return sweep_cgroups(parents, ended)


def _asked_no_limit(run_dir: Path) -> bool:
    """The run's spec says it was launched without --memory-limit: its recorder made no cgroup (it makes one only
    for a limit), so its record need not be read. Every status read the whole record of every run kept here (20 by
    default) for this; the spec is a small file. A spec that cannot be read, or that does not say, reads the record."""
    try:
        spec = json.loads((run_dir / SPEC).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(spec, dict) and "memory_limit" in spec and not spec["memory_limit"]
