"""A live job that is silent, said plainly: where it is (the process the others wait for, what it waits on, and
the user's line that led there), whether it is Python at all, and whether what it printed may still sit in a
block buffer. One reading of a look's samples, whether they were taken here, on a target or on a Slurm node.

`import-hang` is given only when a stack shows an import; every other silence is said as "silent, in X".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from dfdoctor.diagnose import stackclass, waits
from dfdoctor.diagnose.jobstacks import ProcessSample
from dfdoctor.diagnose.stuck import Seen, seen

COMMAND_SHOWN = 60  # characters of a process's command line quoted


@dataclass
class Place:
    """Where a silent job is: `words` for a sentence, and what they say in short."""

    words: str  # "time.sleep, called from setup() at train.py:12"; "`sleep 60` (pid 42), not a Python process: ..."
    sleeping: bool = False  # it sleeps where its code says (time.sleep, or a `sleep` command)
    python: bool = True  # the process it waits in is Python


def in_import(stacks: list) -> bool:
    """Some thread of some process of the job is inside the import machinery."""
    return any("importlib._bootstrap" in st.text or "_find_and_load" in st.text for st in stacks)


def place(samples: list[ProcessSample], stacks: list, cwd: Optional[str] = None) -> Optional[Place]:
    """Where the job is silent: in the process at the end of its chain of waits (a launcher waits for its child,
    the child for a socket), said with the line of the user's code that led there. None when nothing was seen."""
    alive = [s for s in seen(samples) if not s.proc.gone]
    if alive:
        parents = {s.proc.ppid for s in alive}
        leaves = [s for s in alive if s.proc.pid not in parents] or alive
        # a process seen working is where the job is, before a helper child asleep beside it (a compile's
        # worker pool, a watchdog): the chain of waits is followed only from processes that wait
        working = [s for s in alive if s.wait.kind not in (waits.CHILD, waits.AGENT) and s.moved()]
        leaf = next((s for s in working + leaves if s.wait.kind not in (waits.CHILD, waits.AGENT)), leaves[0])
        words = _said(leaf, cwd)
        parent = next((s for s in alive if s.proc.pid == leaf.proc.ppid), None)
        if parent is not None and parent.proc.python and parent.wait.user is not None:
            by = "" if parent.wait.user.func == "<module>" else f"{parent.wait.user.func}() at "
            words += f"; started by {by}{_line(parent.wait.user, cwd)}"
        return Place(words, sleeping=leaf.wait.kind == waits.SLEEP, python=leaf.proc.python)
    for st in stacks:  # no samples (no py-spy here): the main thread's innermost frame of a plain dump
        main = stackclass.main_thread(st.text)
        if main and main.frames:
            return Place(f"{main.frames[0].func}, at {_line(main.frames[0], cwd)}")
    return None


def _said(s: Seen, cwd: Optional[str]) -> str:
    """One process's wait in words: Python with the user's line; any other process by its command and the
    kernel's wait."""
    w = s.wait
    what = _WHAT.get(w.kind, w.kind)
    if w.kind in (waits.SOCKET,) and w.detail:
        what = f"a read from {w.detail}"
    elif w.kind == waits.RENDEZVOUS and w.detail.startswith(waits.STORE_WAIT):
        what = f"a wait on {w.detail}"  # the kernel's socket to it; no stack says init_process_group
    elif w.kind == waits.LISTEN and w.detail:
        what = f"a wait for a client on {w.detail}"
    elif w.kind == waits.SLEEP and w.detail and w.detail != "time.sleep":
        what = w.detail  # "asleep in clock_nanosleep": the kernel's word, no Python stack to say more
    elif w.kind == waits.IDLE and w.detail:
        what = f"a wait in {w.detail}"
    if not s.proc.python:
        cmd = " ".join(s.proc.cmdline)
        cmd = cmd if len(cmd) <= COMMAND_SHOWN else cmd[:COMMAND_SHOWN - 3] + "..."
        return f"`{cmd}` (pid {s.proc.pid}), not a Python process: {what}"
    if w.user is not None:
        called = "" if w.user.func == "<module>" else f"{w.user.func}() at "
        return f"{what}, called from {called}{_line(w.user, cwd)}"
    look = s.proc.last
    if look is not None and not look.stacks.text:
        return f"{what} (pid {s.proc.pid}; its Python stack could not be read: {look.stacks.error or 'none'})"
    where = f" in {w.where.short()}" if w.where is not None else ""
    return f"{what}{where} (pid {s.proc.pid})"


def _line(f: stackclass.Frame, cwd: Optional[str]) -> str:
    """`train.py:12`: the file as the user names it (relative to the job's folder when inside it)."""
    path = f.file
    if cwd and os.path.isabs(path) and path.startswith(cwd.rstrip("/") + "/"):
        path = os.path.relpath(path, cwd)
    return f"{path}:{f.line}"


_WHAT = {waits.SLEEP: "time.sleep", waits.SOCKET: "a read from a socket", waits.LISTEN: "a wait for a client", waits.CHILD: "a wait for its child process",
         waits.IMPORT: "an import", waits.WORKING: "work on the CPU", waits.STDIN: "a read from stdin",
         waits.LOCK: "a wait for a file lock", waits.IDLE: "a wait", waits.CUDA_SYNC: "CUDA synchronisation",
         waits.COMPILE: "a wait for torch.compile's workers", waits.DATALOADER: "a wait for a DataLoader batch",
         waits.RENDEZVOUS: "init_process_group", waits.COLLECTIVE: "a collective", waits.AGENT: "torchrun's loop"}
