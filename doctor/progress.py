"""What dfdoctor is doing, shown on the terminal while it works: one line, rewritten in place and erased before
the report, so nothing of it stays on screen above the verdict.

Shown only where a person watches: stderr is a terminal, TERM is not `dumb` (it cannot erase a line), CI is not
set (a CI log keeps every rewrite as a line of its own), and `-q` was not given (`quiet`, set by the command line).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO

from dfdoctor.model import CheckRecord
from dfdoctor.registry import Check

REDRAW_S = 0.25  # at most four rewrites a second: enough to see the seconds count, cheap on a slow terminal
DOING_AFTER_S = 3.0  # a check running this long has its `doing` said on the line
WIDTH = 200  # characters of a line at most (a terminal narrower than that wraps it; erasing then fails)
ERASE = "\r\x1b[2K"

quiet = False  # `-q`: the verdict line only (cli.options sets it for every command)


def wanted(stream: TextIO) -> bool:
    """Whether a progress line may be drawn on `stream` (see the module's docstring)."""
    if quiet or os.environ.get("TERM") == "dumb" or os.environ.get("CI", "") not in ("", "0", "false"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def seconds(s: float) -> str:
    """An elapsed time as a person reads it: `7 s`, `1 min 05 s`."""
    s = max(0, int(s))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


class StatusLine:
    """One line on stderr, rewritten by `show` (at most every REDRAW_S unless forced) and erased by `close`.
    Silent where `wanted` says no."""

    def __init__(self, stream: Optional[TextIO] = None, enabled: Optional[bool] = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self._drawn_at = 0.0
        self._shown = ""

    def show(self, text: str, force: bool = False) -> None:
        """Draw `text` in place of the line shown so far."""
        if not self.enabled or (not force and time.monotonic() - self._drawn_at < REDRAW_S):
            return
        self._drawn_at = time.monotonic()
        text = " ".join(text.split())[:WIDTH]  # one line: a newline in a job's text would leave a line behind
        if text == self._shown:
            return
        self._shown = text
        self._write(ERASE + text)

    def close(self) -> None:
        """Erase the line (the report is printed where it was)."""
        if self.enabled and self._shown:
            self._shown = ""
            self._write(ERASE)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the report still goes where it was asked
            self.enabled = False


class WatchLine(StatusLine):
    """`watching 12 s: waiting for its first output` while a launch or a status watches a job: how long, what
    for, and how old the job's last output is."""

    def __init__(self, stream: Optional[TextIO] = None, enabled: Optional[bool] = None) -> None:
        super().__init__(stream, enabled)
        self.t0 = time.monotonic()

    def say(self, waiting_for: str, last_output_s: Optional[float] = None, force: bool = False) -> None:
        """What the watch waits for now; `last_output_s`: the age of the job's last line (None: none yet)."""
        if not self.enabled:
            return
        age = f"; last line {seconds(last_output_s)} ago" if last_output_s is not None else ""
        self.show(f"dfdoctor: watching the job for {seconds(time.monotonic() - self.t0)}: {waiting_for}{age}",
                  force=force)


class Progress:
    """The progress of a phase's checks (`[3/10] running: log.writable 2s, ...`), as engine.run_phase reports it."""

    def __init__(self, total: int, stream: Optional[TextIO] = None, enabled: Optional[bool] = None) -> None:
        self.line = StatusLine(stream, enabled)
        self.total = total
        self.running: dict[str, float] = {}
        self.doing: dict[str, str] = {}
        self.done = 0

    def __call__(self, event: str, chk: Optional[Check], rec: Optional[CheckRecord]) -> None:
        if event == "start":
            self.running[chk.id] = time.monotonic()
            self.doing[chk.id] = chk.doing
        elif event != "tick":
            self.running.pop(chk.id, None)
            self.done += 1  # its line is not kept: the report below says it, once
        self._draw(force=event != "tick")

    def _draw(self, force: bool) -> None:
        if not self.line.enabled:
            return
        now = time.monotonic()
        # a slow check comes first, with what it does in its words: a bare id for a minute says nothing
        slow = next((c for c, t in self.running.items() if self.doing.get(c) and now - t >= DOING_AFTER_S), None)
        order = sorted(self.running.items(), key=lambda item: item[0] != slow)[:4]
        names = ", ".join(f"{cid} {now - t:.0f}s" + (f": {self.doing[cid]};" if cid == slow else "")
                          for cid, t in order).replace(";,", ";")
        self.line.show(f"[{self.done}/{self.total}] " + (f"running: {names}" if names else "checks done"), force=force)

    def close(self) -> None:
        self.line.close()
