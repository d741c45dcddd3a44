"""The command lines a project's README gives: its run lines (`python main.py --epochs 6`, `torchrun ...`) and its
install lines (`pip install -e .`), from fenced code blocks, each with the file and line it was read at."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dfdoctor.safefile import read_head_text

_RUNNERS = ("python", "python3", "torchrun", "accelerate", "deepspeed", "bash", "sh", "srun", "sbatch")
_NAMES = ("README.md", "readme.md", "README.rst", "README", "README.txt", "Readme.md")


@dataclass(frozen=True)
class ReadmeLine:
    """One command a README shows."""

    file: str  # relative to the project's root
    line: int
    text: str  # the command, without a `$ ` prompt or a trailing comment

    @property
    def words(self) -> list[str]:
        """The command's words (shell quoting undone), empty when it does not split."""
        try:
            return shlex.split(self.text)
        except ValueError:
            return []

    @property
    def where(self) -> str:
        """file:line."""
        return f"{self.file}:{self.line}"


def readme_lines(folders: list[Path], root: Path) -> list[ReadmeLine]:
    """The commands in the READMEs of `folders` (the script's folder first, then its parents up to the root)."""
    out: list[ReadmeLine] = []
    for folder in folders:
        for name in _NAMES:
            path = folder / name
            if path.is_file():
                out += _commands(path, root)
                break
    return out


def _commands(path: Path, root: Path) -> list[ReadmeLine]:
    text = read_head_text(path, 1 << 20)  # never the whole of a file of unknown size
    if text is None:
        return []
    try:
        rel = str(path.relative_to(root))
    except ValueError:
        rel = str(path)
    out = []
    fenced = False
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
            continue
        if not fenced and not raw.startswith("    "):  # code blocks only: fenced, or indented four spaces
            continue
        line = _command(stripped)
        if line:
            out.append(ReadmeLine(rel, n, line))
    return out


def _command(line: str) -> Optional[str]:
    """The command in one code line, or None when it runs nothing of interest."""
    line = re.sub(r"^(?:\(\w+\)\s*)?[$>#%]\s+", "", line)  # prompts: `$ `, `(venv) $ `
    comment = re.search(r"\s#", line)  # a trailing comment: `\s+#.*$` backtracks over every blank run (quadratic)
    line = (line[:comment.start()] if comment else line).strip()
    words = line.split()
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):  # CUDA_VISIBLE_DEVICES=0 python ...
        i += 1
    if i >= len(words):
        return None
    first = words[i]
    if first in ("pip", "pip3", "conda", "uv") or first.split("/")[-1] in _RUNNERS or first.endswith(".py"):
        return line
    if first in ("python", "python3") or re.match(r"^python3?(\.\d+)?$", first):
        return line
    return None


def runs_of(lines: list[ReadmeLine], script: str) -> list[ReadmeLine]:
    """The README's lines that run `script` (by its file name)."""
    name = Path(script).name
    return [r for r in lines if any(Path(w).name == name for w in r.words)]

