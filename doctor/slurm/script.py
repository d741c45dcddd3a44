"""Follow a batch script to its training command: the line that runs `srun python`, `torchrun`, `srun
torchrun` or `python -m`, with srun's own options taken off."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from typing import Iterator, Optional

from dfdoctor.slurm.sbatch import read_options
from dfdoctor.lazy_re import compile_later

_PY = compile_later(r"^python[\d.]*$")
_TRAINERS = {"torchrun", "accelerate", "deepspeed"}
# words before a command that still run it: prefixes, and the reserved words of `if …; then …; else …; fi`,
# loops and groups (`if [ -f x ]; then srun python train.py; fi` runs python; `if python t.py; then` too)
_LEADS = {"exec", "time", "nohup", "if", "then", "elif", "else", "while", "until", "do", "!", "{"}
_CONDITIONS = {"if", "then", "elif", "else", "while", "until", "do"}  # a command after one runs only if ...
_OPENS, _CLOSES = {"if", "while", "until", "for", "case"}, {"fi", "done", "esac"}


@dataclass(frozen=True)
class Training:
    """The training command a batch script runs, and how (under srun or not)."""

    argv: tuple[str, ...]
    line: str
    srun: bool
    nproc_per_node: Optional[str] = None
    guarded: bool = False  # under an `if`, a loop or a `case`: the script may not run it (or run it for some tasks)


def find(text: str) -> Optional[Training]:
    """The first line of the script that runs Python or a torch launcher (None when there is none), `guarded`
    where it sits under an `if`, a loop or a `case` (`if [ $SLURM_ARRAY_TASK_ID = 3 ]; then python3 …; fi`)."""
    depth = 0
    for _, line, words in _commands(text):
        for segment in _segments(words):
            found = _training(segment, line)
            if found:
                return replace(found, guarded=depth > 0 or segment[0] in _CONDITIONS)
            depth += (segment[0] in _OPENS) - (segment[0] in _CLOSES)
    return None


def _commands(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """Each line of the script that holds a command: its number (the #! line is 1), its text and its words (a
    line shlex cannot split, an unclosed quote, is no command it can read)."""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            yield number, line, shlex.split(line, comments=True)
        except ValueError:
            continue


@dataclass(frozen=True)
class Step:
    """A command of the script before its training command whose target must exist on the node: a `cd DIR`, or
    a `source VENV/bin/activate`. `stops`: a failure there ends the script (`set -e`, `cd X || exit`, `cd X &&`)."""

    number: int  # the line's number in the script (its #! line is 1)
    line: str
    kind: str  # cd | activate
    path: str  # as written
    stops: bool


def prelude(text: str) -> list[Step]:
    """The literal `cd` and `source .../activate` commands the script runs before its training command (a path
    with `$` or a backquote depends on the job's environment and is left out)."""
    steps: list[Step] = []
    errexit = False
    for number, line, words in _commands(text):
        segments = _segments(words)
        for i, segment in enumerate(segments):
            if _training(segment, line):
                return steps
            errexit = errexit or _sets_errexit(segment)
            step = _step(segment, number, line, errexit or _guarded(words, i))
            if step is not None:
                steps.append(step)
    return steps


def folder_after(text: str, workdir: str) -> str:
    """The folder the training command runs in: `workdir` moved by the script's literal `cd`s before it."""
    folder = workdir
    for step in prelude(text):
        if step.kind == "cd":
            folder = resolve(step.path, folder)
    return folder


def resolve(path: str, folder: str) -> str:
    """A path of the script, against the folder it is in at that line."""
    return os.path.normpath(path if path.startswith("/") else os.path.join(folder, path))


def _step(words: list[str], number: int, line: str, stops: bool) -> Optional[Step]:
    if len(words) == 2 and words[0] in ("cd", "pushd") and not any(c in words[1] for c in "$`~") \
            and words[1] != "-":
        return Step(number, line, "cd", words[1], stops)
    if len(words) == 2 and words[0] in ("source", ".") and words[1].endswith("/activate") \
            and not any(c in words[1] for c in "$`~"):
        return Step(number, line, "activate", words[1], stops)
    return None


def _sets_errexit(words: list[str]) -> bool:
    """`set -e`, `set -euo pipefail`, `set -o errexit`."""
    if not words or words[0] != "set":
        return False
    return any(w.startswith("-") and not w.startswith("--") and "e" in w[1:] and w != "-o" for w in words[1:]) or \
        any(a == "-o" and b == "errexit" for a, b in zip(words[1:], words[2:]))


def _guarded(words: list[str], index: int) -> bool:
    """The index-th simple command of the line is followed by `&&` or by `|| exit`: a failure there ends the
    script or skips what comes next."""
    ops = [w for w in words if w in (";", "&&", "||", "|", "&")]
    if index < len(ops) and ops[index] == "&&":
        return True
    if index < len(ops) and ops[index] == "||":
        after = words[words.index("||") + 1:] if "||" in words else []
        return bool(after) and after[0] in ("exit", "return")
    return False


def _training(words: list[str], line: str) -> Optional[Training]:
    """The training command in one simple command, if it is one."""
    under_srun = False
    while words and (words[0] in _LEADS or "=" in words[0] and not words[0].startswith("-")):
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
