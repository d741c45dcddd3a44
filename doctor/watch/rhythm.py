"""A job's own rhythm: how often it prints, and so when its silence means something.

"Quiet" is relative. A job that logs every 5 s is not quiet 3 s after its last line; one that logs ten times a
second is quiet after 3 s. The recorder's heartbeat holds what is needed: how many progress lines the job wrote,
when its first and its last output came (wall clock).
"""

from __future__ import annotations

import os
from typing import Any, Optional

GRACE_S = 5.0  # a job that has not shown a rhythm yet is quiet after this long without output
RHYTHMS = 3.0  # quiet = silent for this many of its own intervals between lines
MIN_SPAN_S = 2.0  # lines spread over less than this are a burst, not a rhythm
GROWING_S = 3.0  # a job called running printed within this long (or within its own rhythm, if slower)
HEARTBEAT_S = 1.0  # the heartbeat's last_output_t can be this stale
SAMPLE_CAP_S = 15.0  # stacks are sampled no later than this into a silence, whatever the rhythm: stuck is named fast


def interval(hb: Optional[dict[str, Any]]) -> Optional[float]:
    """The job's mean time between progress lines, once it wrote three or more; else None."""
    hb = hb or {}
    lines = int(hb.get("progress_lines") or 0)
    first, last = hb.get("first_output_t"), hb.get("last_output_t")
    if lines < 3 or first is None or last is None or last - first < MIN_SPAN_S:
        return None  # a burst at start-up is no rhythm
    return (last - first) / (lines - 1)


def still_growing(hb: Optional[dict[str, Any]], silent: float) -> bool:
    """Whether a silence this long is still within the job's pace: its own rhythm once it has one (a job that
    prints every 0.1 s and has been silent for 2 s is not growing: issue 41), GROWING_S before that."""
    every = interval(hb)
    return silent < ((RHYTHMS * every + HEARTBEAT_S) if every is not None else GROWING_S)


def silent_for(hb: Optional[dict[str, Any]], now: float, started: Optional[float],
               log: Optional[str] = None) -> float:
    """Seconds since the job's last output (since its start when it wrote nothing); `now` is wall time. A log
    the job writes itself (--no-redirect, a logging FileHandler) counts: its last change is output too."""
    last = (hb or {}).get("last_output_t") or started
    if log:
        try:
            changed = os.stat(log).st_mtime
            if started is None or changed >= started:
                last = max(last or 0.0, changed)
        except OSError:
            pass
    return max(0.0, now - last) if last else 0.0


def quiet_after(hb: Optional[dict[str, Any]]) -> float:
    """How long a silence must last to be unusual for this job."""
    every = interval(hb)
    return GRACE_S if every is None else max(GRACE_S, RHYTHMS * every + HEARTBEAT_S)


def came_back(hb: Optional[dict[str, Any]]) -> bool:
    """Whether the job's last output came after a silence longer than its quiet time before it (a compile, a busy
    index build): the mean interval then hides the silence, and one line after it is no pace. The recorder notes
    that silence itself, so a watch that began after it still sees it."""
    hb = hb or {}
    gap, last = hb.get("silence_before_last_s"), hb.get("last_output_t")
    if not gap or last is None:
        return False
    before = dict(hb, last_output_t=last - gap, progress_lines=max(0, int(hb.get("progress_lines") or 0) - 1))
    return gap >= quiet_after(before)


def sample_after(hb: Optional[dict[str, Any]]) -> float:
    """How long into a silence the stacks are sampled: the job's quiet time, capped (sampling only names a wait
    the stacks prove, so looking early costs a dump, never a wrong verdict)."""
    return min(quiet_after(hb), SAMPLE_CAP_S)


def words(hb: Optional[dict[str, Any]], now: float, started: Optional[float], log: Optional[str] = None) -> str:
    """`prints every ~5.0 s; last output 2.1 s ago`, for evidence (`has written nothing yet` when it wrote
    nothing: the time since its start is no output's age)."""
    pace = pace_words(hb)
    silent = silent_for(hb, now, started, log)
    if not (hb or {}).get("last_output_t") and started is not None and silent >= now - started:
        return f"{pace}; it has written nothing in the {silent:.0f} s since its start"
    return f"{pace}; last output {silent:.1f} s ago"


def pace_words(hb: Optional[dict[str, Any]]) -> str:
    """`prints every ~5.0 s`, or `has no steady rhythm yet`."""
    every = interval(hb)
    return f"prints every ~{_seconds(every)}" if every is not None else "has no steady rhythm yet"


def _seconds(every: float) -> str:
    """An interval in words: `5.0 s`, or `30 ms` for a job that prints many lines a second (nanoGPT's
    `iter N: loss` on a CPU: `~0.0 s` said nothing)."""
    return f"{every:.1f} s" if every >= 0.1 else f"{every * 1000:.0f} ms"
