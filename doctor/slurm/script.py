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
        words = _cut(words)
        under_srun = False
        while words and (words[0] in ("exec", "time", "nohup") or "=" in words[0] and not words[0].startswith("-")):
            words = words[1:]
        if words and words[0].split("/")[-1] == "srun":
            _, rest, _ = read_options(words[1:])
            words, under_srun = rest, True
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
        if not words:
            continue
        head = words[0].split("/")[-1]
        if _PY.match(head) or head in _TRAINERS:
            return Training(tuple(words), line, under_srun, _nproc(words) if head == "torchrun" else None)
    return None


def _cut(words: list[str]) -> list[str]:
    """The first command of a line (up to `;`, `&&`, `||`, `|`, or a redirect)."""
    out = []
    for w in words:
        if w in (";", "&&", "||", "|", "&") or w.startswith((">", "2>", "<")):
            break
        out.append(w)
    return out


def _nproc(words: list[str]) -> Optional[str]:
    for i, w in enumerate(words):
        for flag in ("--nproc_per_node", "--nproc-per-node"):
            if w == flag and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(flag + "="):
                return w.split("=", 1)[1]
    return None
