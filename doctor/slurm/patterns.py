"""sbatch's file name patterns (`--output`, `--error`) resolved the way slurmstepd resolves them when it opens the
file (Slurm 22.05, measured against the files the real slurmstepd created; `scontrol show job`'s StdOut is a
cruder expansion that keeps `%%`, widths and backslashes as typed, so it is not where the job writes):
- a backslash anywhere makes the whole name literal: each backslash is dropped, the character after it kept,
  and no %-letter is expanded (`a\\b/x-%j.out` is the file `ab/x-%j.out`);
- `%%` is one `%`; a letter Slurm does not know stays as typed (`%q`), as does a `%` at the end;
- a width (`%5j`) zero-pads the numbers (`%j %A %a %n %t`, at most 10 digits) and is ignored for the others;
- `%a` of a job that is not an array is 4294967294 (Slurm's NO_VAL); `%b` is not a letter in 22.05.
Which values cannot be known before submission (`%j` has no value until Slurm gives the job an id) stay."""

from __future__ import annotations

import getpass
import re
from pathlib import PurePosixPath
from typing import Optional

from dfdoctor.lazy_re import compile_later

_PATTERN = compile_later(r"%(\d*)([%AajJNnstux])")
_KNOWN_LATER = {"A", "a", "j", "J", "N", "n", "s", "t"}  # need the job id, the array task or the node
_PADDED = {"A", "a", "j", "n", "t"}
_MAX_WIDTH = 10
NOT_AN_ARRAY = "4294967294"


def literal(pattern: str) -> Optional[str]:
    """The name a pattern with a backslash stands for (taken literally), or None when it has none."""
    if "\\" not in pattern:
        return None
    out, escaped = [], False
    for ch in pattern:
        if ch == "\\" and not escaped:
            escaped = True
            continue
        out.append(ch)
        escaped = False
    return "".join(out)


def expand(pattern: str, *, job_name: str, user: Optional[str] = None, job_id: Optional[str] = None,
           node: Optional[str] = None, array_job: Optional[str] = None, array_task: Optional[str] = None,
           array: bool = False) -> str:
    """The pattern with every value we know substituted; unknown ones stay as `%j` etc."""
    return _expand(pattern, job_name=job_name, user=user, job_id=job_id, node=node, array_job=array_job,
                   array_task=array_task, array=array)[0]


def resolve(pattern: str, **known) -> Optional[str]:
    """The file name slurmstepd opens for a pattern, or None while a letter in it has no value yet."""
    name, missing = _expand(pattern, **known)
    return None if missing else name


def _expand(pattern: str, *, job_name: str, user: Optional[str] = None, job_id: Optional[str] = None,
            node: Optional[str] = None, array_job: Optional[str] = None, array_task: Optional[str] = None,
            array: bool = False) -> tuple[str, bool]:
    lit = literal(pattern)
    if lit is not None:
        return lit, False
    user = user or getpass.getuser()
    task = array_task if array_task is not None else (None if array else (NOT_AN_ARRAY if job_id else None))
    values = {"%": "%", "x": job_name, "u": user, "j": job_id, "J": f"{job_id}.batch" if job_id else None,
              "N": node, "n": "0" if node else None, "t": "0" if node else None, "s": "batch" if node else None,
              "A": array_job or job_id, "a": task}

    missing = []

    def sub(m: re.Match) -> str:
        v = values.get(m[2])
        if v is None:
            missing.append(m[0])
            return m[0]
        if m[1] and m[2] in _PADDED and v.isdigit():
            return v.zfill(min(int(m[1]), _MAX_WIDTH))
        return v
    return _PATTERN.sub(sub, pattern), bool(missing)


def unresolved(pattern: str) -> list[str]:
    """The %-letters in a pattern that only exist once the job does (`%j`, `%N`, ...)."""
    if literal(pattern) is not None:
        return []
    return [m[0] for m in _PATTERN.finditer(pattern) if m[2] in _KNOWN_LATER]


def folder(pattern: str) -> Optional[str]:
    """The folder a pattern writes into, when the folder itself has no per-job letters (None otherwise)."""
    parent = str(PurePosixPath(pattern).parent)
    return None if unresolved(parent) else parent


def default_output(array: bool) -> str:
    """Where sbatch writes when no --output is given (relative to the job's working directory)."""
    return "slurm-%A_%a.out" if array else "slurm-%j.out"
