"""Where a job runs, as one interface: a placement (Slurm, Ray, ...) claims a launch line or a `status`/`stop`
reference, checks before the launch, starts the job, watches it (a source handed to `watch/loop.py`), judges it
and stops it. The commands ask the placements (`dfdoctor.placements`) and never name a scheduler themselves.

This machine and the --target kinds are the pipeline a line falls to when no placement claims it
(`launch/orchestrate.py`); a target kind is the other axis (how to reach one machine, `targets/kinds/`).
This module is the interface alone: it imports no placement, so each placement's package can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


@dataclass
class LaunchAsk:
    """What `dfdoctor launch` asks of a placement, its options read (the CLI parses, the placement acts)."""

    watch_s: float
    run_dir: Optional[Path] = None
    force: bool = False
    no_check: bool = False
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    cfg: Any = None
    settle_s: float = 0.0


@dataclass
class Ended:
    """What a placement's stop did to the job where the placement runs it (Slurm's scancel, Ray's stop
    endpoint): `dfdoctor.stop` wraps it in its `Stopped`, and prints `lines()`."""

    job_id: str
    state_before: str
    state_after: str = ""
    said: str = ""  # the scheduler's own words when it refused the stop
    left: list[str] = field(default_factory=list)  # what the scheduler still shows of the job

    @property
    def was_running(self) -> bool:
        return False

    @property
    def done(self) -> bool:
        """Nothing of the job is left."""
        return not self.left and not self.said

    def lines(self) -> list[str]:
        """What the stop did, in the scheduler's words."""
        return []

    def left_words(self) -> str:
        """What is left, for the STILL RUNNING line."""
        return f"job {self.job_id} ({', '.join(self.left)})"

    def note(self) -> dict[str, Any]:
        """What the run folder's "stopped" event records of it (read back by `diagnose/stopped.py`)."""
        return {}


class Placement:
    """Where a job runs. A subclass answers each question for its scheduler; `dfdoctor.placements.ALL` holds one
    instance of each. The references it owns are `PREFIX:JOB_ID` (`slurm:42`, `ray:raysubmit_X`); the run
    folders it makes hold `spec[name]`."""

    name = ""  # the reference prefix and the run spec's key ("slurm", "ray")
    where = ""  # for `dfdoctor stop`'s first line: "in Slurm"
    submitter = ""  # what submits its jobs, as the user knows it: "sbatch"

    target_scheme = ""  # a `--target SCHEME://...` that names this placement's cluster, not a machine ("ray")

    def claims(self, ctx: Any) -> bool:
        """Whether the launch line (or --launcher) of `ctx` is this placement's."""
        raise NotImplementedError

    def line_for_target(self, spec: str, command: list[str]) -> list[str]:
        """The launch line `--target SPEC -- COMMAND` means (its `target_scheme`): one `claims` takes. A
        UsageError when the spec or the command cannot be one."""
        raise NotImplementedError

    def claims_spec(self, spec: dict[str, Any]) -> bool:
        """Whether a run folder's spec is of a launch this placement made."""
        return self.name in spec

    def job_of(self, ref: str) -> str:
        """The job id a `PREFIX:ID` reference names; a UsageError when it cannot be one."""
        raise NotImplementedError

    def check(self, ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
        """The pre-launch checks of the line (CheckRecords)."""
        raise NotImplementedError

    def launch(self, ctx: Any, ask: LaunchAsk) -> Any:
        """Check, start, watch and judge: the launch's Report (saved in its run folder)."""
        raise NotImplementedError

    def status(self, cwd: Path, ref: Optional[str], watch_s: float) -> Any:
        """`status PREFIX:ID` or `status RUN` of a run this placement launched: a Report."""
        raise NotImplementedError

    def stop(self, job_id: str, grace_s: float, spec: Optional[dict[str, Any]] = None) -> Ended:
        """End the job where it runs, and say what is left of it (`spec`: its run folder's, when it has one)."""
        raise NotImplementedError

    def job_in_spec(self, spec: dict[str, Any]) -> Optional[str]:
        """The job id a run folder's spec holds (None: the scheduler refused it, nothing was submitted)."""
        job = (spec.get(self.name) or {}).get("job_id")
        return str(job) if job else None
