"""Thread stacks of a live job, taken from outside with py-spy.

Why py-spy: a job stuck in an import, a lock or CUDA init cannot be asked to dump its own stacks (it never
registered faulthandler, and it may hold the GIL forever). `py-spy dump --pid` reads the interpreter's
memory from outside via process_vm_readv (root here, or ptrace permission), needs no cooperation and no
restart, works on any CPython 3.x, and prints every thread with its state (active/idle/gil). Where py-spy is
missing or not allowed, we fall back to what the kernel shows: each thread's state and wait channel.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from dfdoctor.agent.procfs import descendants
from dfdoctor.agent.pyspy_words import py_spy_error
from dfdoctor.command import run_command

if TYPE_CHECKING:  # start-up: imported by the walk of a job's tree (`family`), not for py_spy(), which every watch
    import psutil  # asks as it begins: a job that ends in a moment walks no tree (issue 45)

DUMP_TIMEOUT_S = 10.0
MAX_PROCESSES = 4  # the job and a few Python children are enough to see who waits on whom


@dataclass(frozen=True)
class Stacks:
    """The stacks of one process, or why we could not get them."""

    pid: int
    text: str
    tool: str  # py-spy | kernel
    error: Optional[str] = None
    # The user's files as they are where the process runs ({path: text}, from a target's agent); None: it runs
    # here, and its files are read here.
    sources: Optional[dict] = field(default=None, compare=False)


def py_spy() -> Optional[str]:
    """The py-spy executable: on PATH, or installed beside dfdoctor's interpreter."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


def kernel_view(pid: int) -> str:
    """Each thread's name, scheduler state and kernel wait channel: what is left without py-spy."""
    lines = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return ""
    for tid in tids[:64]:
        base = f"/proc/{pid}/task/{tid}"
        try:
            comm = Path(base, "comm").read_text().strip()
            state = Path(base, "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(base, "wchan").read_text().strip() or "-"
        except OSError:
            continue
        lines.append(f"thread {tid} ({comm}): state {state}, waiting in {wchan}")
    return "\n".join(lines)


def dump(pid: int, timeout: float = DUMP_TIMEOUT_S, nonblocking: bool = False) -> Stacks:
    """Every thread's Python stack of process `pid`. `nonblocking` reads without pausing it: a paused thread's
    sleep or read is interrupted and resumes as restart_syscall, which hides from the kernel what it waits on."""
    tool = py_spy()
    if tool:
        argv = [tool, "dump", "--full-filenames", "--pid", str(pid)] + (["--nonblocking"] if nonblocking else [])
        out = run_command(argv, timeout=timeout, stack_signal=None)
        if out.returncode == 0 and out.stdout.strip():
            return Stacks(pid, out.stdout.strip(), "py-spy")
        why = out.spawn_error or py_spy_error(out.stderr) or f"exit status {out.returncode}"
        if out.timed_out:
            why = f"py-spy did not answer within {timeout:g} s"
    else:
        why = "py-spy is not installed (pip install py-spy)"
    return Stacks(pid, kernel_view(pid), "kernel", why)


def family(pid: int) -> list[psutil.Process]:
    """The process and all its descendants, parents before children ([] when it is gone). Read from the kernel's
    children lists where it keeps them (procfs.descendants: the tree's own processes alone), else by psutil."""
    import psutil  # start-up: see TYPE_CHECKING above
    try:
        root = psutil.Process(pid)
        pids = descendants(pid)
        if pids is None:
            return [root] + root.children(recursive=True)
    except psutil.Error:
        return []
    out = [root]
    for kid in pids:
        try:
            out.append(psutil.Process(kid))
        except psutil.Error:
            continue  # it ended as we walked (psutil's own walk leaves it out too)
    return out


def python_processes(pid: int) -> list[int]:
    """The job's process and its descendants that run Python, the job first."""
    import psutil  # start-up: see TYPE_CHECKING above
    out = []
    for p in family(pid):
        try:
            if p.pid == pid or "python" in os.path.basename(p.exe() or p.name()):
                out.append(p.pid)
        except psutil.Error:
            continue
    return out[:MAX_PROCESSES]


def dump_tree(pid: int, timeout: float = DUMP_TIMEOUT_S) -> list[Stacks]:
    """Stacks of the job and of its Python descendants (a shell wrapper's child is the interesting one)."""
    return [dump(p, timeout) for p in python_processes(pid)]
