"""Small text files read where they are: on this machine, or fetched from a --target in one probe round trip.

A check that reads the job's files (a requirements file and what it includes) reads them through a `Files`:
`HERE` reads this machine's; `fetch` asks the target for the named files (text_files_probe.py, or another probe
that read them in its own round trip), then for the files those include, one round trip per level, and answers
from what came back. A folder on this machine named
like the target's is never read for it: it belongs to another machine.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Callable, Iterable, Optional, Protocol

from dfdoctor.command import ProbeOutcome
from dfdoctor.probe import run_probe, unreached
from dfdoctor.safefile import read_head

MAX_BYTES = 1 << 20  # a requirements file is a few KiB; a larger "requirements.txt" is not one
TIMEOUT_S = 15.0


def request(paths: Iterable[Path]) -> dict:
    """What text_files_probe.py (or deps_probe.py's `read`) is asked for `paths`."""
    return {"paths": list(dict.fromkeys(posixpath.normpath(str(p)) for p in paths)), "max_bytes": MAX_BYTES}


class Files(Protocol):
    """Where a check reads the job's files."""

    problem: Optional[str]

    def has(self, path: Path) -> bool:
        """Whether the file is there (a regular file)."""

    def text(self, path: Path) -> Optional[str]:
        """The file's text; None when it is not there (or not a readable regular file)."""

    def key(self, path: Path) -> object:
        """What tells two names of one file apart (an include loop is read once)."""


class _Here:
    """This machine's files."""

    problem: Optional[str] = None

    def has(self, path: Path) -> bool:
        return path.is_file()

    def text(self, path: Path) -> Optional[str]:
        data = read_head(path, MAX_BYTES)  # never the whole of a file of unknown size (`-r data/corpus.txt`)
        if data is None or len(data) > MAX_BYTES:
            return None  # not there, not a regular file, or too large to be a requirements file
        return data.decode("utf-8", "replace")

    def key(self, path: Path) -> object:
        return path.resolve()


HERE: Files = _Here()


class Fetched:
    """The files a target sent back, by their absolute path there."""

    def __init__(self) -> None:
        self.texts: dict[str, Optional[str]] = {}
        self.problem: Optional[str] = None

    def has(self, path: Path) -> bool:
        return self.text(path) is not None

    def text(self, path: Path) -> Optional[str]:
        return self.texts.get(self.key(path))

    def key(self, path: Path) -> str:
        return posixpath.normpath(str(path))


def fetch(ctx, paths: Iterable[Path], *, includes: Callable[[Path, str, dict], list[Path]],
          depth: int, first: Optional[ProbeOutcome] = None) -> Fetched:
    """`paths` on ctx's target, and the files their texts include (`includes`), up to `depth` levels deep.
    `first`: the outcome of a probe that read `paths` already, in its own round trip (`request(paths)` under
    its `read`, as deps_probe.py does): its `files` are the first level's answer."""
    got = Fetched()
    wanted = [Path(p) for p in paths]
    for _ in range(depth + 1):
        ask = list(dict.fromkeys(got.key(p) for p in wanted if got.key(p) not in got.texts))
        if not ask:
            break
        out = first or run_probe(ctx, "text_files_probe.py", request=request(ask),
                                 timeout=min(TIMEOUT_S, float(ctx.timeout or TIMEOUT_S)))
        first = None
        answer = (out.payload or {}).get("files")
        if not isinstance(answer, dict):
            if unreached(ctx, out) is None:  # an unreachable target is said once, by the check's next probe
                got.problem = "the probe gave no answer" + (" (timed out)" if out.timed_out
                                                            else f" (exit status {out.returncode})")
            break
        wanted = []
        for name in ask:
            entry = answer.get(name) or {}
            text = entry.get("text") if isinstance(entry.get("text"), str) else None
            got.texts[name] = text
            if text is None and entry.get("error"):
                got.problem = f"{name}: {entry['error']}"
            if text is not None:
                wanted += includes(Path(name), text, ctx.env)
    return got
