"""A shared ssh connection (ControlMaster) never outlives dfdoctor, even killed by SIGKILL.

`ssh -f` daemonizes the master: nothing of dfdoctor's ending reaches it, and with ControlPersist=yes it would
stay logged in, serving its socket, for ever. So each master gets a watchman: a tiny process in a session of its
own (Ctrl-C to dfdoctor's group does not end it first) that waits on a pipe only dfdoctor's processes hold the
writing end of. However dfdoctor ends, the kernel closes that end; the watchman then ends the master (still
the same process: its start time) and removes the socket's folder. On a normal end the master is closed first
and the watchman finds nothing to do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Optional

from dfdoctor.agent.procfs import proc_start_time

WATCHMAN = r"""
import os, shutil, signal, sys
for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
pid, ticks, folder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while True:
    try:
        if not os.read(0, 4096):
            break
    except InterruptedError:
        continue
    except OSError:
        break
try:
    with open("/proc/%d/stat" % pid) as f:
        now = f.read().rsplit(")", 1)[1].split()[19]
except (OSError, IndexError):
    now = None
if now == ticks:
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass
if folder:
    shutil.rmtree(folder, ignore_errors=True)
"""


def watch(master: int, folder: Optional[str]) -> Optional["Watchman"]:
    """Start the watchman of `master` (and of the socket `folder` dfdoctor made, removed with it), for `release`
    at the block's end. None when it cannot be started (the master is then closed as before, only not on a
    SIGKILL)."""
    ticks = proc_start_time(master)
    if ticks is None:
        return None
    r, w = os.pipe()  # both close-on-exec: only this process and its forks (the checks' workers) hold `w`
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", WATCHMAN, str(master), str(ticks), folder or ""],
                                stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                                start_new_session=True)
    except OSError:
        os.close(w)
        return None
    finally:
        os.close(r)
    return Watchman(w, proc)


class Watchman:
    """A started watchman: the writing end of its pipe, and the process, ours to reap."""

    def __init__(self, w: int, proc: subprocess.Popen) -> None:
        self.w, self.proc = w, proc


def release(watchman: Optional[Watchman]) -> None:
    """The block is over (its master closed): the watchman, its pipe's end closed, exits at once, and is reaped
    as it does (it was left a zombie while dfdoctor ran on). Reaped by a thread that waits for it: the block's
    end does not wait for its interpreter to get to its read, nor for a fork of ours (a check's worker) that
    still holds the pipe."""
    if watchman is None:
        return
    os.close(watchman.w)
    if watchman.proc.poll() is None:
        threading.Thread(target=watchman.proc.wait, name="dfdoctor-watchman-reaper", daemon=True).start()
