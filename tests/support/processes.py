"""Processes the tests of "is this the process the record names" need: a live one and a zombie, both ours."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def live_and_zombie() -> Iterator[tuple[subprocess.Popen, subprocess.Popen]]:
    """A sleeping child and a child already a zombie (exited, not yet reaped); the live one is killed and both are
    reaped on the way out, so their pids may be reused afterwards."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and Path(f"/proc/{zombie.pid}/stat").read_text().split(") ")[1][0] != "Z":
            time.sleep(0.02)
        yield live, zombie
    finally:
        live.kill()
        live.wait()
        zombie.wait()
