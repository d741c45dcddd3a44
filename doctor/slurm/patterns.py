"""sbatch's file name patterns (`--output`, `--error`): what each %-letter becomes, and which cannot be known
before submission (`%j` has no value until Slurm gives the job an id)."""

from __future__ import annotations

import getpass
import re
from pathlib import PurePosixPath
from typing import Optional

_PATTERN = re.compile(r"%(\d*)([%AajJNnstuxb])")
_KNOWN_LATER = {"A", "a", "j", "J", "N", "n", "s", "t", "b"}  # need the job id, the array task or the node


def expand(pattern: str, *, job_name: str, user: Optional[str] = None, job_id: Optional[str] = None,
           node: Optional[str] = None, array_job: Optional[str] = None, array_task: Optional[str] = None) -> str:
    """The pattern with every value we know substituted; unknown ones stay as `%j` etc."""
    user = user or getpass.getuser()
    values = {"%": "%", "x": job_name, "u": user, "j": job_id, "J": job_id, "N": node, "n": "0" if node else None,
              "t": "0", "s": "batch", "A": array_job or job_id, "a": array_task, "b": array_task}

    def sub(m: re.Match) -> str:
        v = values.get(m[2])
        if v is None:
            return m[0]
        return v.zfill(int(m[1])) if m[1] and v.isdigit() else v
    return _PATTERN.sub(sub, pattern)


def unresolved(pattern: str) -> list[str]:
    """The %-letters in a pattern that only exist once the job does (`%j`, `%N`, ...)."""
    return [m[0] for m in _PATTERN.finditer(pattern) if m[2] in _KNOWN_LATER]


def folder(pattern: str) -> Optional[str]:
    """The folder a pattern writes into, when the folder itself has no per-job letters (None otherwise)."""
    parent = str(PurePosixPath(pattern).parent)
    return None if unresolved(parent) else parent


def default_output(array: bool) -> str:
    """Where sbatch writes when no --output is given (relative to the job's working directory)."""
    return "slurm-%A_%a.out" if array else "slurm-%j.out"
