"""Reading a Python traceback out of a job's stderr: the exception, where it was raised, and what it said."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Optional

from dfdoctor.lazy_re import compile_later

EXC_LINE = compile_later(r"^(?:[A-Za-z_][\w]*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)|"
                         r"KeyboardInterrupt|SystemExit|StopIteration)(?::.*)?$")
FILE_LINE = compile_later(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
RANK_PREFIX = compile_later(r"^\[rank(?P<rank>\d+)\]:(?: |$)")


@dataclass(frozen=True)
class PyError:
    """The Python exception at the end of a stderr: its type, message, where it was raised, and its tail."""

    exc_type: str
    message: str
    file: Optional[str]
    line: Optional[int]
    code: Optional[str]
    tail: tuple[str, ...]
    before: str  # what stderr held before this traceback began
    after: tuple[str, ...] = ()  # the lines printed after the exception line (a multi-line message goes on there)
    user_frame: Optional[tuple[str, int]] = None  # the innermost frame outside the standard library and packages
    user_code: Optional[str] = None  # the source line of user_frame, as the traceback printed it
    frames: tuple[tuple[str, int, Optional[str]], ...] = ()  # every frame, outermost first: (file, line, code)

    @property
    def headline(self) -> str:
        """`Type: message`, as Python prints it."""
        return f"{self.exc_type}: {self.message}" if self.message else self.exc_type

    @property
    def where(self) -> str:
        """`file, line N`, or that it is unknown."""
        return f"{self.file}, line {self.line}" if self.file else "an unknown place"

    @property
    def user_where(self) -> str:
        """Where the job's own code made the call that failed (`file, line N`), else `where`."""
        return f"{self.user_frame[0]}, line {self.user_frame[1]}" if self.user_frame else self.where

    @property
    def in_library(self) -> bool:
        """The exception was raised inside an installed package or the standard library, below the job's code."""
        return self.file is not None and _library(self.file) and self.user_frame is not None

    @property
    def blame(self) -> str:
        """`file, line N (`code`)` of the job's own line that led to the error, for summaries and fixes."""
        return self.user_where + (f" (`{self.user_code}`)" if self.user_frame and self.user_code else "")

    @property
    def library_evidence(self) -> list[str]:
        """Where a library raised the error under the job's line, as an evidence line (none when the job's own
        code raised it)."""
        if not self.in_library:
            return []
        return [f"raised inside {self.where}" + (f" (`{self.code}`)" if self.code else "")
                + f", called from the job's {self.user_where}"]

    @property
    def text(self) -> str:
        """The whole message: the exception line and what followed it."""
        return "\n".join([self.headline, *self.after])


def parse_python_error(stderr: str) -> Optional[PyError]:
    """The last Python exception in `stderr`, with the file and line that raised it."""
    lines = stderr.rstrip().splitlines()
    for i in range(len(lines) - 1, max(-1, len(lines) - 60), -1):
        if not EXC_LINE.match(lines[i]):
            continue
        exc_type, _, message = lines[i].partition(":")
        start = i
        file = code = None
        line_no = None
        for j in range(i - 1, max(-1, i - 200), -1):
            m = FILE_LINE.match(lines[j])
            if m and file is None:
                file, line_no, start = m["file"], int(m["line"]), j
                nxt = lines[j + 1].strip() if j + 1 < i else ""
                code = nxt if nxt and not nxt.startswith("^") else None
            if lines[j].startswith("Traceback (most recent call last):"):
                start = j
                break
        if file is None and not lines[i].startswith(("SyntaxError", "IndentationError", "TabError")):
            if not any(l.startswith("Traceback") for l in lines[max(0, i - 200):i]):
                continue
        tail = tuple(lines[max(start, i - 5): i + 1]) if file else (lines[i],)
        frames = _frames(lines[start:i])
        user = next((f for f in reversed(frames) if not _library(f[0])), None)
        return PyError(exc_type.strip(), message.strip(), file, line_no, code, tail, "\n".join(lines[:start]),
                       tuple(lines[i + 1:i + 8]), user[:2] if user else None, user[2] if user else None,
                       tuple(frames))
    return None


def _frames(lines: list[str]) -> list[tuple[str, int, Optional[str]]]:
    """The `File "...", line N` frames of a traceback, each with the source line printed under it."""
    out = []
    for k, text in enumerate(lines):
        m = FILE_LINE.match(text)
        if not m:
            continue
        nxt = lines[k + 1].strip() if k + 1 < len(lines) else ""
        code = nxt if nxt and not FILE_LINE.match(lines[k + 1]) and not set(nxt) <= set("^~ ") else None
        out.append((m["file"], int(m["line"]), code))
    return out


def _library(path: str) -> bool:
    """A frame in installed packages or the standard library, not the job's own code."""
    path = path.replace("\\", "/")
    if path in ("<string>", "<stdin>"):  # `python -c`, exec() of the job's own text (nanoGPT's configurator)
        return False
    return ("site-packages/" in path or "dist-packages/" in path or path.startswith("<") or
            re.search(r"/lib/python3\.?\d*/", path, re.IGNORECASE) is not None or _installed_elsewhere(path))


@functools.lru_cache(maxsize=256)
def _installed_elsewhere(path: str) -> bool:
    """A file of a package pip installed outside site-packages (`pip install --target DIR`, put on PYTHONPATH):
    its top folder has a `NAME-VERSION.dist-info` beside it. Looked at on this machine only."""
    p = os.path.dirname(path)
    for _ in range(4):
        parent, name = os.path.dirname(p), os.path.basename(p)
        if not name or parent == p:
            return False
        want = name.lower().replace("-", "_")
        try:
            if any(e.endswith(".dist-info") and e.lower().replace("-", "_").startswith(want + "_")
                   for e in os.listdir(parent)):
                return True
        except OSError:
            return False
        p = parent
    return False


def is_library(path: str) -> bool:
    """A frame path in installed packages or the standard library (not the job's own code)."""
    return _library(path)


def rank_output(text: str, rank: int) -> str:
    """The lines torch.distributed's excepthook printed for one rank (`[rankN]: ...`), without the prefix."""
    out = []
    for line in text.splitlines():
        m = RANK_PREFIX.match(line)
        if m and int(m["rank"]) == rank:
            out.append(line[m.end():])
    return "\n".join(out)


def ranks_with_traceback(text: str) -> list[int]:
    """The ranks that printed a traceback, in the order their first line appears."""
    seen: list[int] = []
    for line in text.splitlines():
        m = RANK_PREFIX.match(line)
        if m and line[m.end():].startswith("Traceback") and int(m["rank"]) not in seen:
            seen.append(int(m["rank"]))
    return seen
