"""One reading of a look at a launched run's live job, for a run on this machine and one on a --target alike:
its quiet time on the clock of the job's machine, the lock cycle both of its samples show, the wait they prove.

Only how the look is taken differs (py-spy and /proc here, `launch/remote.py`'s agent answers there); what it
means is `diagnose/look.py`'s, and the quiet time is `watch/rhythm.py`'s: this module joins them to a run's record,
which diagnose/ may not do with watch/'s rules (watch/ imports diagnose/: docs/architecture.md, *Imports*).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from dfdoctor.run.folder import RunFolder
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord
from dfdoctor.watch import rhythm

if TYPE_CHECKING:  # start-up: what a look means is imported with the look (`judge`): clock and own_log are asked
    # on every poll of a watch, of a job that may end before any look
    from dfdoctor.diagnose.jobstacks import ProcessSample

CYCLE_EVENT = "compile-deadlock-seen"  # launcher.jsonl: when a lock cycle was first seen, and its signature


def clock(run: RunRecord) -> float:
    """Now, on the clock of the machine the job runs on: ours, or for a run on a --target its last heartbeat's
    time (the record's times are the target's; its clock may differ from ours)."""
    if run.is_remote:
        return float((run.heartbeat or {}).get("t") or time.time())
    return time.time()


def own_log(run: RunRecord) -> Optional[str]:
    """The job's --log where its last change can be read from here (a target's is there: its heartbeat says)."""
    return None if run.is_remote else run.spec.get("log")


def judge(run: RunRecord, facts: LiveFacts, samples: list[ProcessSample]) -> None:
    """Fill a look's facts from the samples of every process (`facts.stacks` already holds the look's stacks):
    how long the job has been quiet, by its own rhythm; a lock cycle both samples show (noted in the run folder,
    so a later look says since when); else the wait the samples prove for a job silent past its rhythm."""
    from dfdoctor.diagnose.look import classified_as, judge_wait, lasting_cycle  # start-up: see TYPE_CHECKING
    from dfdoctor.launch import past_imports
    hb = run.heartbeat or {}
    now, started, log = clock(run), (run.spawned or {}).get("t"), own_log(run)
    facts.job = samples
    facts.quiet_s = rhythm.silent_for(hb, now, started, log)
    facts.rhythm = rhythm.words(hb, now, started, log)
    facts.quiet = facts.quiet_s >= rhythm.sample_after(hb)
    cycle = lasting_cycle(facts.stacks, samples)
    if cycle is not None:
        facts.classified = classified_as(cycle)
        facts.cycle_detail = cycle.detail()
        _note_cycle(run, cycle)
        facts.stuck_since = _seen_since(run, cycle.signature())
        return
    # a wait explains a silence; a job that logs at its pace has none to explain. A block buffer explains only
    # the silence since the job was seen past its imports (an import fills no buffer: past_imports.py)
    since = past_imports.seen_past_since(run, samples, facts.stacks, now)
    busy_s = facts.quiet_s if since is None else min(facts.quiet_s, max(0.0, now - since))
    judge_wait(facts, samples, facts.quiet_s, local=not run.is_remote, flushed=bool(hb.get("stdout_flushed")),
               busy_s=busy_s)


def _note_cycle(run: RunRecord, cycle) -> None:
    """Note the first sighting of each lock cycle in the run folder (for a --target, its local copy), so a later
    `status` can say since when the threads are stuck."""
    signature = cycle.signature()
    if _seen_since(run, signature) is None:
        RunFolder.at(run.dir).append_event(CYCLE_EVENT, signature=[list(x) for x in signature],
                                           headline=cycle.headline())


def _seen_since(run: RunRecord, signature: tuple) -> Optional[float]:
    """When this same cycle was first seen (launcher.jsonl), or None."""
    want = [list(x) for x in signature]
    return next((e.get("t") for e in run.launcher if e.get("event") == CYCLE_EVENT and e.get("signature") == want),
                None)
