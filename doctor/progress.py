"""A one-line live progress display on a terminal: which checks run, how many are done."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from dfdoctor.model import CheckRecord
from dfdoctor.registry import Check


class Progress:
    """Redraws one status line on stderr while checks run, and erases it when they are done: nothing of it stays
    on screen above the report. Silent when stderr is not a terminal."""

    def __init__(self, total: int, stream: Optional[TextIO] = None, enabled: Optional[bool] = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = total
        self.running: dict[str, float] = {}
        self.done = 0
        self._drawn = 0.0

    def __call__(self, event: str, chk: Optional[Check], rec: Optional[CheckRecord]) -> None:
        if event == "tick":
            if self.enabled and time.monotonic() - self._drawn >= 0.25:
                self._draw()
            return
        if event == "start":
            self.running[chk.id] = time.monotonic()
        else:
            self.running.pop(chk.id, None)
            self.done += 1  # its line is not kept: the report below says it, once
        self._draw()

    def _clear(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[2K")

    def _draw(self) -> None:
        if not self.enabled:
            return
        self._drawn = time.monotonic()
        self._clear()
        if self.running:
            now = time.monotonic()
            names = ", ".join(f"{cid} {now - t:.0f}s" for cid, t in list(self.running.items())[:4])
            self.stream.write(f"[{self.done}/{self.total}] running: {names}"[:200])
        self.stream.flush()

    def close(self) -> None:
        self._clear()
        if self.enabled:
            self.stream.flush()
