"""Running dfdoctor on a real terminal (a pseudo-terminal of its own), and reading what stays on screen."""

from __future__ import annotations

import os
import pty
import select
import signal
import time
from pathlib import Path
from typing import Optional, Sequence

ERASE = "\x1b[2K"


def on_tty(argv: Sequence[str], cwd: Path, env: Optional[dict[str, str]] = None, timeout: float = 120) -> str:
    """Everything `argv` wrote to its terminal (stdout and stderr both are the pty), as text. Killed (and the
    test fails on the missing verdict) after `timeout` seconds."""
    env = dict(os.environ if env is None else env)
    env.setdefault("TERM", "xterm")
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execve(argv[0], list(argv), env)
        finally:
            os._exit(127)
    chunks = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child and everything holding the terminal are gone
            break
        if not data:
            break
        chunks.append(data)
    else:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def left_on_screen(out: str) -> list[str]:
    """The lines a terminal shows at the end: on each line, what follows its last erase (or carriage return)."""
    return [seg.split(ERASE)[-1].split("\r")[-1] for seg in out.replace("\r\n", "\n").split("\n")]
