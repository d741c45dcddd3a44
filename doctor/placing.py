"""Where a job runs, as one interface: a placement (this machine, a --target, Slurm, Ray, ...) claims a launch line
or a `status`/`stop` reference, checks before the launch, starts the job, watches and judges it, and stops it. The
launch sequence itself is written once (`launch/pipeline.py`) and asks the placement at each step; the commands
ask the registry (`dfdoctor.placements`) and never name a scheduler or a target kind themselves.

A target kind (ssh, pct, lxc, docker: `targets/kinds/`) is the other axis: how to reach one machine. Every kind is
run by the one --target placement (`launch/places.py`), which asks the kind's class.
This module is the interface alone: it imports no placement, so each placement's package can import it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Optional

if TYPE_CHECKING:  # what a placement is asked and answers: placing_answers.py, imported where one is made
    from dfdoctor.placing_answers import Ended, Judged, LaunchAsk, Started, Stopped

DEFAULT_WATCH_S = 60.0  # `launch`'s watch
STATUS_WATCH_S = 3.0  # status on a live job: long enough to see its output grow


class Placement:
    """Where a job runs. A subclass answers each question for its place; `dfdoctor.placements.ALL` holds one
    instance of each, asked in order (this machine last: it claims what no other does). A scheduler's references
    are `PREFIX:JOB_ID` (`slurm:42`, `ray:raysubmit_X`); the run folders it makes hold `spec[name]`. The defaults
    here are a scheduler's (a job submitted to something that runs it, stopped by a job id)."""

    name = ""  # the reference prefix and the run spec's key ("slurm", "ray"); "" takes no PREFIX:ID reference
    where = ""  # for `dfdoctor stop`'s first line: "in Slurm"
    submitter = ""  # what submits its jobs, as the user knows it: "sbatch"
    # how a launch the pre-launch checks stopped is worded (`engine.not_started`)
    not_started_words = {"not_done": "Not submitted", "subject": "the job", "force": "--force submits anyway"}
    sigterm_ends_watch = False  # SIGTERM during the launch ends the watch as Ctrl-C does (the verdict is printed)

    target_scheme = ""  # a `--target SCHEME://...` that names this placement's cluster, not a machine ("ray")

    # ---- which launches, references and run folders are its own -------------------------------------------
    def claims(self, ctx: Any) -> bool:
        """Whether the launch line (or --launcher) of `ctx` is this placement's."""
        raise NotImplementedError

    def line_for_target(self, spec: str, command: list[str]) -> list[str]:
        """The launch line `--target SPEC -- COMMAND` means (its `target_scheme`): one `claims` takes. A
        UsageError when the spec or the command cannot be one."""
        raise NotImplementedError

    def report_target(self, ctx: Any) -> str:
        """Where the job runs, as the report's `target` says it: the --target by default; a cluster this
        placement submits to names itself (Ray: the head the line submits to)."""
        return str(ctx.target)

    def claims_spec(self, spec: dict[str, Any]) -> bool:
        """Whether a run folder's spec is of a launch this placement made."""
        return bool(self.name) and self.name in spec

    def job_of(self, ref: str) -> str:
        """The job id a `PREFIX:ID` reference names; a UsageError when it cannot be one."""
        raise NotImplementedError

    def job_in_spec(self, spec: dict[str, Any]) -> Optional[str]:
        """The job id a run folder's spec holds (None: the scheduler refused it, nothing was submitted)."""
        job = (spec.get(self.name) or {}).get("job_id")
        return str(job) if job else None

    # ---- check ------------------------------------------------------------------------------------------
    def check_options(self) -> list:
        """Options of its own that `dfdoctor check` takes (click decorators; Slurm's --slurm-nodes)."""
        return []

    def check_instead(self, opts: dict[str, Any], command: list[str], started: str) -> Optional[tuple[Any, str]]:
        """`dfdoctor check` done its own way when one of its `check_options` asks (a report and the --fail-on
        level); None: the usual check of the line."""
        return None

    def check(self, ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
        """`dfdoctor check` of the line: the pre-launch checks (CheckRecords)."""
        raise NotImplementedError

    # ---- launch: the steps `launch/pipeline.py` takes, in order --------------------------------------------
    def prepare(self, ctx: Any, ask: LaunchAsk) -> LaunchAsk:
        """The ask as this placement takes it (the config's check selection, ...); a UsageError for an option
        that does not apply here."""
        return ask

    def meanwhile(self, ctx: Any, ask: LaunchAsk) -> None:
        """Start loading, in a thread, what the launch needs before its start, while `connected` logs in (called
        just before it): nothing here; a --target's pre-launch checks."""

    def connected(self, ctx: Any) -> ContextManager[Any]:
        """What stays open for the whole launch (one ssh connection to a --target)."""
        return contextlib.nullcontext()

    def pre_checks(self, ctx: Any, ask: LaunchAsk) -> list:
        """The checks run before the launch (those of `check`, unless the placement runs others)."""
        return self.check(ctx, ask.only, ask.skip, ask.cfg)

    def blockers(self, ctx: Any, records: list) -> list:
        """The findings that stop the launch (unless --force)."""
        from dfdoctor.engine import launch_blockers  # start-up: `--help` loads no check machinery
        return launch_blockers(records)

    def start(self, ctx: Any, ask: LaunchAsk, timeline: list[dict[str, Any]]) -> Started:
        """Make the run folder and start (or submit) the job; events go on `timeline`."""
        raise NotImplementedError

    def watch(self, ctx: Any, ask: LaunchAsk, job: Started, records: list,
              timeline: list[dict[str, Any]]) -> Judged:
        """Watch the started job (a source handed to `watch/loop.py`) and judge it; `records`: the pre-launch
        checks, which the verdict may name as its cause foretold."""
        raise NotImplementedError

    def output_instead_of_log(self, ctx: Any, run: dict[str, Any]) -> Any:
        """Where the job's output goes when this placement never opens dfdoctor's --log (a scheduler's own file
        or logs): an `unused_log.Instead`; None where --log is written (the recorder's placements). `run`: the
        launch report's run object once the job was submitted ({} before)."""
        return None

    def finish(self, ctx: Any, report: Any) -> None:
        """Last words on the saved report, shown only (the line as typed, a working line offered)."""

    # ---- status and stop ----------------------------------------------------------------------------------
    def status(self, cwd: Path, ref: Optional[str], watch_s: float, cfg: Any = None,
               only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> Any:
        """`status PREFIX:ID` or `status RUN` of a run this placement launched: a Report."""
        raise NotImplementedError

    def run_folders(self, cwd: Path, ref: Optional[str]) -> tuple[Path, ...]:
        """The run folder `status REF` reads (none for a `PREFIX:ID` reference): no --output may land in it."""
        if ref and self.name and ref.startswith(f"{self.name}:"):
            return ()
        from dfdoctor.run.folder import find_run  # start-up, as above
        return (find_run(cwd, ref),)

    def connected_to_run(self, cwd: Path, ref: Optional[str]) -> ContextManager[Any]:
        """What stays open while `status REF` looks, until its verdict is printed."""
        return contextlib.nullcontext()

    def stop(self, job_id: str, grace_s: float, spec: Optional[dict[str, Any]] = None) -> Ended:
        """End the job where it runs, and say what is left of it (`spec`: its run folder's, when it has one)."""
        raise NotImplementedError

    def stop_job(self, run: str, job_id: str, grace_s: float, spec: Optional[dict[str, Any]] = None) -> Stopped:
        """`stop PREFIX:ID`, or the job of run `run`: the placement's own stop, waited for."""
        from dfdoctor.placing_answers import Stopped  # imported here: only a stop makes one (issue 45)
        c = self.stop(job_id, grace_s, spec)
        return Stopped(run, self.where, was_running=c.was_running and not c.said, placed=c, error=c.said or None)

    def stop_run(self, run_dir: Path, run: Any, grace_s: float) -> Stopped:
        """Stop the job of the run folder `run_dir` (its RunRecord `run`), where it runs."""
        job_id = self.job_in_spec(run.spec)
        if not job_id:
            from dfdoctor.placing_answers import Stopped  # imported here: see stop_job
            return Stopped(run.id, self.where, error=f"{self.submitter} refused this job: nothing was submitted")
        return self.stop_job(run.id, job_id, grace_s, run.spec)
