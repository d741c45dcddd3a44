"""How many processes a project's launcher script starts, and by which of its own arguments: timm's
`./distributed_train.sh 4 ARGS` runs `torchrun --nproc_per_node=$NUM_PROC train.py "$@"` after `NUM_PROC=$1;
shift`. A fix that asks for fewer processes is then said the project's way, with the script's own argument
(`./distributed_train.sh 1 ARGS`), not as a torchrun flag the user's command never shows.

Read from the script's text, never run: only a count given as a positional parameter (`$1`, `${2}`) or through a
variable assigned one plainly (`NUM_PROC=$1`) is followed; anything else is not said.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Optional

from dfdoctor.lazy_re import compile_later

_SHELLS = ("bash", "sh", "dash", "zsh")
_NPROC = compile_later(r"--nproc[_-]per[_-]node(?:=|\s+)[\"']?\$\{?(\w+)\}?")
_LAUNCHERS = ("torchrun", "torch.distributed.launch", "torch.distributed.run")
_MAX_BYTES = 64 * 1024


def one_process(argv: list[str], cwd: Optional[str]) -> Optional[tuple[str, str]]:
    """(the command with the launcher's process count set to 1, how that argument was read) when `argv` runs a
    launcher script that passes one of its positional arguments to torchrun's --nproc_per_node and the command
    gives it a number above 1; else None."""
    at = _script_index(argv)
    if at is None:
        return None
    path = Path(argv[at])
    path = path if path.is_absolute() or not cwd else Path(cwd) / path
    try:
        with open(path, errors="replace") as fh:
            text = fh.read(_MAX_BYTES)
    except OSError:
        return None
    position = _count_position(text)
    if position is None or at + position >= len(argv):
        return None
    given = argv[at + position]
    if not given.isdigit() or int(given) <= 1:
        return None
    line = [*argv[:at + position], "1", *argv[at + position + 1:]]
    how = (f"{path.name}'s argument {position} ({given} here) is the --nproc_per_node of the "
           f"{_launcher_word(text)} line it runs")
    return shlex.join(line), how


def _script_index(argv: list[str]) -> Optional[int]:
    """Where the launcher script is in the command: `./x.sh`, `bash x.sh` (the shell's own options skipped)."""
    if not argv:
        return None
    if argv[0].endswith(".sh"):
        return 0
    if argv[0].rsplit("/", 1)[-1] in _SHELLS:
        k = next((i for i, a in enumerate(argv[1:], 1) if not a.startswith("-")), None)
        return k if k is not None and argv[k].endswith(".sh") else None
    return None


def _count_position(text: str) -> Optional[int]:
    """The positional parameter (1, 2, ...) a torchrun/torch.distributed.launch line takes its process count
    from, directly (`$1`) or through one plain assignment (`NUM_PROC=$1`)."""
    lines = [ln.split("#", 1)[0] for ln in text.splitlines()]
    for ln in lines:
        if not any(word in ln for word in _LAUNCHERS):
            continue
        m = _NPROC.search(ln)
        if m is None:
            continue
        name = m.group(1)
        if name.isdigit():
            return int(name)
        assigned = [re.fullmatch(rf"\s*(?:export\s+|local\s+)?{name}=[\"']?\$\{{?(\d)\}}?[\"']?\s*", x) for x in lines]
        found = [int(a.group(1)) for a in assigned if a]
        others = [x for x in lines if re.match(rf"\s*(?:export\s+|local\s+)?{name}=", x)]
        return found[0] if len(found) == 1 and len(others) == 1 else None  # assigned once, plainly
    return None


def _launcher_word(text: str) -> str:
    return next((w for w in _LAUNCHERS if w in text), "torchrun")
