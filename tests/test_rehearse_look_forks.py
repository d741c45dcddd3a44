"""What look.sh forks while it waits (a rehearsal's look runs for the whole of the line's session, at every place):
once the sentinel has started it forks nothing until the runner's word comes, and after that it tells whether the
sentinel still runs without a `tr | grep` of its command line every tick, and still sees it go at once.

The look runs here as the runner starts it (`sh -c LOOK`), on a sentinel folder of its own: a stand-in sentinel
(a real process whose command line names the folder, as the rehearsal's does) writes start.json and beats."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from dfdoctor.rehearse.runner import LOOK

SENTINEL = """
import json, os, sys, time
d = sys.argv[1]
with open(d + "/start.json.tmp", "w") as f:
    json.dump({"pid": os.getpid()}, f)
os.rename(d + "/start.json.tmp", d + "/start.json")
b = 0
while not os.path.exists(d + "/stop"):
    with open(d + "/beat", "w") as f:
        f.write(str(b))
    b += 1
    time.sleep(0.1)
"""


def _children(pid: int) -> dict[int, str]:
    """The look's children now, each with its name (a subshell of the look is `sh`)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(w) for w in f.read().split()]
    except OSError:
        return {}
    out = {}
    for k in kids:
        try:
            with open(f"/proc/{k}/comm") as f:
                out[k] = f.read().strip()
        except OSError:
            pass  # gone as it was read
    return out


def _watch(pid: int, seconds: float) -> dict[int, str]:
    """Every child the look had in the next `seconds`, sampled every few milliseconds."""
    seen: dict[int, str] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.update(_children(pid))
        time.sleep(0.002)
    return seen


class _Look:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir()
        self.proc = subprocess.Popen(["sh", "-c", LOOK, "sh", str(folder), "python3"], bufsize=0,  # no read-ahead
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.sentinel = subprocess.Popen([sys.executable, "-c", SENTINEL, str(folder), f"{folder}/"])

    def line(self, within: float = 30.0) -> bytes:
        assert self.sel.select(timeout=within), "look.sh said nothing"
        return self.proc.stdout.readline()

    def rest(self) -> str:
        """All it says until it ends (told that the session ended)."""
        out = b""
        while self.sel.select(timeout=30):
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
        self.proc.wait(timeout=30)
        return out.decode()

    def close(self) -> None:
        if self.sentinel.poll() is None:
            os.kill(self.sentinel.pid, signal.SIGKILL)
        self.sentinel.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the look and its reader, where the test failed before its end
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.sel.close()
        self.proc.stdout.close()


def test_once_the_sentinel_started_the_look_forks_nothing_until_the_session_ends(tmp_path: Path):
    look = _Look(tmp_path / "rh")
    try:
        assert look.line().startswith(b"==started {"), "the look did not say the sentinel started"
        time.sleep(0.2)
        seen = _watch(look.proc.pid, 1.0)
        # one child: the reader of the runner's word, there since the look began (a `sleep` a tick was 20 a second)
        assert len(seen) == 1 and set(seen.values()) == {"sh"}, seen
        look.proc.stdin.write(b"0 0 0\n")
        look.proc.stdin.close()
        out = look.rest()
        assert "==alive yes" in out and "==done" in out, out
    finally:
        look.close()


def test_after_the_session_the_look_reads_the_sentinel_without_a_fork_a_tick_and_sees_it_go(tmp_path: Path):
    look = _Look(tmp_path / "rh")
    try:
        assert look.line().startswith(b"==started {")
        look.proc.stdin.write(b"60 60 120\n")  # a margin of 60 ticks (3 s): the look reads the sentinel meanwhile
        look.proc.stdin.close()
        seen = _watch(look.proc.pid, 1.1)
        # its first turn sees the sentinel by its command line (one `tr | grep`), then no more: a `tr | grep` a
        # tick was 40 forks a second
        assert len([k for k, name in seen.items() if name in ("tr", "grep")]) <= 2, seen
        killed = time.monotonic()
        os.kill(look.sentinel.pid, signal.SIGKILL)  # left a zombie (not reaped here): gone, for the look
        out = look.rest()
        # gone at once: not at the margin's end (1.9 s after the kill), nor a second without heartbeats after it
        assert time.monotonic() - killed < 1.5, time.monotonic() - killed
        assert "==alive no" in out and "==beats none" in out, out
    finally:
        look.close()
