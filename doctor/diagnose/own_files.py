"""A job that keeps its own log: `logging.basicConfig(filename='train.log')`, a FileHandler, a trainer's own
log file. Launched without --log, nothing is promised to land anywhere else, so that file is the job's log: seen
growing, it is progress and the job is running; written by a job that ended with status 0, it is what the job
wrote. (With --log, the same file is `log-elsewhere`: the user reads a log that stays empty.)"""

from __future__ import annotations

import os
import shlex
import time
from typing import Optional

from dfdoctor.model import Verdict
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord
from dfdoctor.lazy_re import compile_later

# where tools the job starts keep logs that grow on their own timers (wandb's service, a cache), not its progress
TOOL_FOLDERS = ("/wandb/", "/.cache/", "/mlruns/", "/torchinductor_", "/.dfdoctor/")
# Ray's session folder (its GCS, raylet and the driver's core worker write there on their own timers from the moment
# ray.init() starts them): on a loaded machine they grew before Ray's own line saying which cluster the driver
# joined, and the job was called running on them, that line unread (ray-wrong-cluster missed)
RAY_SESSION = compile_later(r"/session_(?:latest|\d{4}-\d\d-\d\d_[\d_-]+)/")
Sizes = tuple[float, dict[str, tuple[int, int]]]  # (when, {path: (pid, size)})


def sizes(files: list) -> Sizes:
    """The sizes of the files a look found open for writing (`job_outputs(..., sizes=True)["files"]`), now."""
    return time.monotonic(), {path: (pid, size) for pid, path, size in files
                              if size >= 0 and not _a_tools(path)}


def _a_tools(path: str) -> bool:
    """A file a tool the job started keeps (its own timers), not the job's log."""
    return any(t in path for t in TOOL_FOLDERS) or RAY_SESSION.search(path) is not None


def grown(before: Sizes, after: Sizes) -> dict[str, tuple[int, int, float]]:
    """The files that grew between two sizings: {path: (pid, bytes grown, seconds between the sizings)}."""
    t0, old = before
    t1, new = after
    return {path: (pid, size - old[path][1], round(t1 - t0, 1))
            for path, (pid, size) in new.items() if path in old and size > old[path][1]}


def grew_as_looked(run: RunRecord, live: Optional[LiveFacts]) -> bool:
    """Launched without --log, a file the job writes itself grew while its processes were looked at: progress."""
    return live is not None and bool(live.grew) and not run.spec.get("log")


def grows_its_own_log(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """Launched without --log, a file the job writes itself grew while we looked: it runs, and that is its log."""
    if not grew_as_looked(run, live):
        return None
    path, (pid, grew, secs) = next(iter(live.grew.items()))
    quiet = f"nothing on its stdout/stderr ({run.output_bytes()} bytes)" if not run.output_bytes() else \
        f"{run.output_bytes()} bytes on its stdout/stderr"
    return Verdict("running", None, f"The job is running: its own log {_named(run, path)} grows (pid {pid}).",
                   f"Follow it with `tail -f {shlex.quote(path)}`; `dfdoctor status {run.id}` diagnoses it again "
                   "later.",
                   [f"{path} grew by {grew} bytes in {secs:g} s while its processes were looked at (pid {pid} "
                    "has it open for writing)", quiet] + live.notes)


def wrote_its_own_log(run: RunRecord) -> Optional[str]:
    """Launched here without --log, the file the finished job kept as its own log (it has bytes), else None."""
    if run.spec.get("log") or run.is_remote:
        return None
    for ev in run.all("outputs"):
        if ev.get("streams"):
            return None  # its stdout itself went elsewhere: not a log of its own beside it
        for _, path in ev.get("files") or []:
            try:
                if os.stat(path).st_size > 0:
                    return path
            except OSError:
                continue
    return None


def finished_with_its_own_log(run: RunRecord, status_line: str) -> Optional[Verdict]:
    """Status 0 and its own log written: it ran to completion (it was `log-elsewhere`, failed)."""
    path = wrote_its_own_log(run)
    if path is None:
        return None
    ex = run.exit or {}
    return Verdict("ok", None, f"The job ran to completion (exit status 0 after {ex.get('wall_s')} s); it wrote its "
                   f"own log {_named(run, path)}.", "", [status_line, f"its own log: {path} "
                   f"({os.path.getsize(path) if os.path.exists(path) else '?'} bytes)",
                   f"output on stdout/stderr: {run.output_bytes()} bytes"])


def _named(run: RunRecord, path: str) -> str:
    """The file as the user would name it: relative to the job's folder when it lies inside it."""
    cwd = run.spec.get("cwd")
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return os.path.relpath(path, cwd)
    return path
