"""Since when a silent job has been seen past its imports: the part of its silence that a block buffer can explain.

A job that has printed nothing while it imports torch (7 s of wall time at load 8, more on a busier machine) has
nothing in its buffer yet: its silence since its start is not a buffer's. Each look at its stacks says whether
some process of the job is inside an import; the looks are noted in the run folder (launcher.jsonl), so the
watch's later looks and a later `status` read the same history. The buffer's silence is counted from the first
look that saw the job past an import an earlier look had seen it in; where no look saw it importing, the end of
its imports was not observed and its silence counts from its start, as before.
"""

from __future__ import annotations

from typing import Optional

from dfdoctor.diagnose import silence, stuck, waits
from dfdoctor.diagnose.jobstacks import ProcessSample
from dfdoctor.run.folder import RunFolder
from dfdoctor.run.record import RunRecord

IMPORTING = "job-seen-importing"  # launcher.jsonl: a look saw a process of the job inside an import
PAST = "job-seen-past-imports"  # ...and the first look after that which saw none


def importing(samples: list[ProcessSample], stacks: list) -> bool:
    """Some process of the job is inside the import machinery in some round of this look."""
    return any(w.kind == waits.IMPORT for s in stuck.seen(samples) for w in s.waits) or silence.in_import(stacks)


def seen_past_since(run: RunRecord, samples: list[ProcessSample], stacks: list, now: float) -> Optional[float]:
    """Note what this look shows (importing, or past an import seen before) and say since when, on the clock of
    the job's machine (`now`: this look's time there), the job has been seen past its imports; None: no look has
    seen it importing (the end of its imports was not observed), or it is importing now."""
    notes = [e for e in run.launcher if e.get("event") in (IMPORTING, PAST)]
    last = notes[-1] if notes else None
    if importing(samples, stacks):
        if last is None or last.get("event") != IMPORTING:
            _note(run, IMPORTING, now)
        return None
    if last is None:
        return None
    if last.get("event") == PAST:
        return float(last["job_t"])
    _note(run, PAST, now)
    return now


def _note(run: RunRecord, name: str, now: float) -> None:
    """One note in the run folder (for a --target, its local copy); `job_t`: the look's time on the job's clock
    (a target's may differ from ours, whose time the note's `t` is)."""
    RunFolder.at(run.dir).append_event(name, job_t=round(now, 3))
