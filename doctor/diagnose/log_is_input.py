"""A launch refused because its --log is a file the command names for another purpose (its script, a config):
the job's output would have been appended to it. One wording for the refusal of an unchecked start here
(`launch/recorded.py`, before the recorder starts) and for the recorder's own refusal on a --target, which it
records as "log-is-named" before it opens the log (the rule below reads it back, for launch and status alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.named_files import Named, suggested_log
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord


def refusal(log_as_typed: str, log: str, named: list[Named], same: Named, option: str = "--log",
            outcome: str = "the job's output would be appended to it") -> Verdict:
    """Not launched: `log` (`log_as_typed` in the words) is `same`, one of the files the command names (`named`).
    `option`: the option that named the log (sbatch's --output too: slurm/named_output.py), and `outcome` what its
    writer would have done to the file."""
    return Verdict("failed", causes.LOG_NOT_WRITABLE, f"Not launched: {log_as_typed} {same.what()}: {outcome}.",
                   f"Point {option} at a file of its own, e.g. "
                   f"{suggested_log(named, log_as_typed)} (mkdir -p logs first; not tried), then launch again.",
                   [f"{option} {log_as_typed} is the same file"
                    f"{'' if Path(same.path) == Path(log) else ' as ' + same.path}"
                    ": dfdoctor never writes into a file the command names for another purpose"])


def log_is_named(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The recorder found the log to be a file the command names (the spec's "named") and started nothing."""
    ev = run.first("log-is-named")
    if not ev:
        return None
    named = [Named(*n) for n in run.spec.get("named") or ()]
    same = [named[i] for i in ev.get("named") or () if i < len(named)]
    if not same:
        return None
    log = ev.get("path") or run.spec.get("log") or ""
    return refusal(log, log, named, same[0])  # the spec's log is --log as the launch resolved it, as here
