"""The launch sequence, written once for every placement (this machine, a --target, Slurm, Ray): pre-launch
checks, and the launch stopped by a finding that guarantees failure; the start; the watch and the verdict; the
report saved in the run folder, with the pre-launch findings `status` links its verdict to, and the note that
dfdoctor returned. Each step asks the placement (`dfdoctor.placing.Placement`); nothing here names one."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dfdoctor.agent.names import PRE_CHECKS
from dfdoctor.engine import never_forced, not_started, now_iso
from dfdoctor.launch import gated
from dfdoctor.launch.report import checks_event, placed_report, save_report
from dfdoctor.model import Report
from dfdoctor.placing import Placement
from dfdoctor.run.folder import RunFolder
from dfdoctor.safefile import write_atomically
from dfdoctor.unused_log import records as unused_log

if TYPE_CHECKING:  # annotations only: the answers are made where they are built (placing_answers.py)
    from dfdoctor.placing_answers import LaunchAsk

NOT_STARTED_RUN = {"dir": None, "pid": None, "exit_code": None, "signal": None}  # the run object: no job


def launch(placement: Placement, ctx: Any, ask: LaunchAsk) -> Report:
    """Check, start, watch and judge the launch of `ctx` where `placement` runs it: the launch's Report, saved
    (masked) in its run folder when the job was started."""
    report = _launch(placement, ctx, placement.prepare(ctx, ask))
    placement.finish(ctx, report)
    return report


def _launch(placement: Placement, ctx: Any, ask: LaunchAsk) -> Report:
    with placement.connected(ctx):  # one ssh connection for the checks, the start and every look
        started = now_iso()
        records: list = []
        timeline: list[dict[str, Any]] = []
        try:
            if not ask.no_check:
                began = time.time()
                records = placement.pre_checks(ctx, ask)  # a --target's: those that can stop it (launch/gated.py)
                timeline.append(checks_event(records, began))
                blockers = placement.blockers(ctx, records)
                if ask.force:  # those --force does not pass stop it all the same
                    blockers = [b for b in blockers if never_forced(b)]
                if blockers:
                    verdict = not_started(blockers, **placement.not_started_words)
                    return placed_report(ctx, "launch", started, verdict,
                                         unused_log(placement, ctx, ask.skip) + gated.complete(records), timeline,
                                         dict(NOT_STARTED_RUN), placement.report_target(ctx))
            job = placement.start(ctx, ask, timeline)
            gated.begin(records)  # the checks that cannot stop it, after its start (launch/gated.py)
            if job.refused is not None:  # nothing runs: the refusal is the verdict
                report = placed_report(ctx, "launch", started, job.refused,
                                       unused_log(placement, ctx, ask.skip, job.run) + gated.complete(records),
                                       timeline + job.timeline, job.run or dict(NOT_STARTED_RUN),
                                       placement.report_target(ctx))
                return save_report(job.run_dir, report) if job.run_dir is not None else report
            judged = placement.watch(ctx, ask, job, records, timeline)  # its verdict waits for every check
            records = gated.complete(records)
        finally:
            gated.stop(records)  # interrupted, or an error: no check runs on without us (nothing once complete)
    # a --log this placement never opens (Slurm, Ray): said where the output is instead, with the run's own file
    notes = unused_log(placement, ctx, ask.skip, judged.run)
    report = save_report(job.run_dir, placed_report(ctx, "launch", started, judged.verdict,
                                                    notes + records + judged.records,
                                                    timeline + judged.timeline, judged.run,
                                                    placement.report_target(ctx)))
    keep_pre_checks(job.run_dir, report)
    RunFolder.at(job.run_dir).append_event("detached", verdict=judged.verdict.state, cause=judged.verdict.cause)
    return report


def keep_pre_checks(run_dir: Path, report: Report) -> None:
    """Keep the launch's pre-launch findings (masked, as saved in its report) for `status` to connect its verdict
    to them later; report.json itself is rewritten by every status."""
    pre = [c.to_dict() for c in report.checks if c.phase == "pre"]
    try:
        write_atomically(run_dir / PRE_CHECKS, json.dumps(pre, default=str), private=True)
    except OSError:
        pass  # only the link to the pre-launch checks is lost; save_report already reported a full disk
