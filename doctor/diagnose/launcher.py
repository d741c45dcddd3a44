"""A launcher that backgrounds the trainer with a log of its own (`nohup python train.py > train.log 2>&1 &`):
the launcher's quick exit 0 is not the job's end. The trainer it left is the job, and its log is where it
writes. When the user asked for --log elsewhere, the fix is one line of the launcher: its redirect.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Optional

from dfdoctor.diagnose.traceback import PyError, parse_python_error
from dfdoctor.agent.procfs import proc_start_time
from dfdoctor.lazy_re import compile_later

_REDIRECT = compile_later(r"(?P<op>&>>?|\d?>>?)\s*(?P<path>\"[^\"]+\"|'[^']+'|[^\s;&|]+)")


def current_command(pid: int, start_ticks: Optional[int]) -> Optional[str]:
    """The command line pid runs now (the launcher's fork has exec'd the trainer since the exit was noted)."""
    if start_ticks is not None and proc_start_time(pid) != start_ticks:
        return None
    import psutil  # start-up: a verdict imports this module, and asks this of a job that handed off alone
    try:
        return " ".join(psutil.Process(pid).cmdline()) or None
    except psutil.Error:
        return None


def script_of(argv: list[str], cwd: str) -> Optional[Path]:
    """The launcher script the command runs: the first argument that is a file with a shell's look."""
    for a in argv[:3]:
        p = Path(a) if os.path.isabs(a) else Path(cwd, a)
        if p.is_file() and (p.suffix in (".sh", ".bash") or _shebang_shell(p)):
            return p
    return None


def _shebang_shell(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and any(s in first for s in (b"sh", b"bash"))


def redirect_fix(script: Path, writes: str, want: str) -> Optional[tuple[int, str, str]]:
    """(line number, the line, the line rewritten to write `want`) for the launcher line that redirects to the
    file the trainer writes (`writes`, resolved); None when no such line is found."""
    try:
        lines = script.read_text(errors="replace").splitlines()
    except OSError:
        return None
    name = os.path.basename(writes)
    for no, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):
            continue
        for m in _REDIRECT.finditer(line):
            target = m.group("path").strip("\"'")
            if os.path.basename(target) == name:
                fixed = line[:m.start("path")] + shlex.quote(want) + line[m.end("path"):]
                return no, line.strip(), fixed.strip()
    return None


def log_error(path: str) -> Optional[PyError]:
    """The Python exception at the end of a log the trainer wrote itself."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - (64 << 10)))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    return parse_python_error(tail)


def still_running(procs: list[dict]) -> bool:
    """Whether any process the recorder saw left behind still runs (same pid, same start)."""
    return any(proc_start_time(p["pid"]) == p.get("start_ticks") for p in procs if p.get("pid"))
