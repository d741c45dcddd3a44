"""Follow a batch script to its training command: the line that runs `srun python`, `torchrun`, `srun
torchrun` or `python -m`, with srun's own options taken off."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Optional

from dfdoctor.slurm.sbatch import read_options

_PY = re.compile(r"^python[\d.]*$")
_TRAINERS = {"torchrun", "accelerate", "deepspeed"}


@dataclass(frozen=True)
class Training:
    """The training command a batch script runs, and how (under srun or not)."""

    argv: tuple[str, ...]
    line: str
    srun: bool
    nproc_per_node: Optional[str] = None


def find(text: str) -> Optional[Training]:
    """The first line of the script that runs Python or a torch launcher (None when there is none)."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for segment in _segments(words):
            found = _training(segment, line)
            if found:
                return found
    return None


def _training(words: list[str], line: str) -> Optional[Training]:
    """The training command in one simple command, if it is one."""
    under_srun = False
    while words and (words[0] in ("exec", "time", "nohup") or "=" in words[0] and not words[0].startswith("-")):
        words = words[1:]
    if words and words[0].split("/")[-1] == "srun":
        _, rest, _ = read_options(words[1:])
        words, under_srun = rest, True
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    if not words:
        return None
    head = words[0].split("/")[-1]
    if _PY.match(head) or head in _TRAINERS:
        return Training(tuple(words), line, under_srun, _nproc(words) if head == "torchrun" else None)
    return None


def _segments(words: list[str]) -> list[list[str]]:
    """The simple commands of a line (split at `;`, `&&`, `||`, `|`, `&`), each without its redirects."""
    out: list[list[str]] = [[]]
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w in (";", "&&", "||", "|", "&"):
            out.append([])
        elif w.rstrip(";") != w:
            out[-1].append(w.rstrip(";"))
            out.append([])
        elif w in (">", ">>", "2>", "<", "2>>"):
            skip_next = True
        elif not w.startswith((">", "2>", "<", "&>")):
            out[-1].append(w)
    return [s for s in out if s]


def _nproc(words: list[str]) -> Optional[str]:
    for i, w in enumerate(words):
        for flag in ("--nproc_per_node", "--nproc-per-node"):
            if w == flag and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(flag + "="):
                return w.split("=", 1)[1]
    return None
