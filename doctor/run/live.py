"""What a watch sees of a job that is still alive when it ends: the facts the verdict's rules read beside the
run's record (doctor/diagnose/verdict.py), filled by a look here (launch/local.py) or on a target
(launch/remote.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class LiveFacts:
    """What we can see of a job that is still alive when the watch ends."""

    pid: int
    watched_s: float
    growing: bool = False  # the log grew steadily: the job is running
    stacks: list = field(default_factory=list)  # diagnose.stacks.Stacks, one per process
    stdout_targets: list[tuple[int, int, str]] = field(default_factory=list)  # (pid, fd, where it points)
    other_logs: list[tuple[int, str, int]] = field(default_factory=list)  # (pid, path, size) open for writing
    grew: dict[str, tuple[int, float]] = field(default_factory=dict)  # other_logs seen growing in the look: (bytes, s)
    python: bool = False
    buffered: bool = False  # Python, stdout not a tty, neither -u nor PYTHONUNBUFFERED
    cpu_s: Optional[float] = None
    observed_at: float = field(default_factory=time.time)  # wall time of this look
    classified: Optional[tuple[str, str]] = None  # (cause, headline) from dfdoctor.diagnose.stackclass
    cycle_detail: list[str] = field(default_factory=list)  # one line per thread of the lock cycle
    stuck_since: Optional[float] = None  # wall time the same cycle was first seen
    job: list = field(default_factory=list)  # jobstacks.ProcessSample of every process of the tree
    stuck: Optional[Any] = None  # stuck.Finding: a wait the stacks of all processes prove
    quiet_s: Optional[float] = None  # seconds since the job's last output
    rhythm: str = ""  # the job's own pace, in words (watch/rhythm.py)
    notes: list[str] = field(default_factory=list)  # evidence the watch adds (settling, rhythm)
    quiet: bool = False  # silent for longer than its own rhythm (watch/rhythm.py)
    unsettled: Optional[str] = None  # why the watch did not call it settled (a rank missing, one that died)
    unreaped: Optional[str] = None  # the job's process exited and is a zombie: why nobody reaped it yet, in words
