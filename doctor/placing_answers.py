"""What a placement (`placing.py`) is asked and answers at each step: a launch's ask, the job started, the
verdict judged, a scheduler's stop, a stop's outcome. Apart from the interface so that a command that asks none
of it (`check`, `status` of an ended run, `report`, `--version`) makes none of these dataclasses at import."""

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
    keep_runs: int = 0  # how many run folders to keep (0: the default)
    memory_limit: Optional[int] = None  # this machine only: the job's own memory cgroup
    strategy: str = "auto"  # a --target only: how the recorder is detached there


@dataclass
class Started:
    """What a placement's `start` made: its run folder, and either a refusal (the job never began: its verdict,
    the report's run object, more timeline) or its own handle on the job, for its `watch`."""

    run_id: str
    run_dir: Optional[Path]  # None: not even a run folder could be made (nothing is saved)
    refused: Any = None  # a Verdict when the job was not started
    run: dict[str, Any] = field(default_factory=dict)  # the report's run object of a refusal
    timeline: list[dict[str, Any]] = field(default_factory=list)
    handle: Any = None  # the placement's own: a process, a shipped recorder, a job id


@dataclass
class Judged:
    """What a placement's `watch` made of the job: the verdict, the report's run object, and what it adds to the
    timeline and to the checks (post-launch checks)."""

    verdict: Any
    run: dict[str, Any]
    timeline: list[dict[str, Any]] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)


@dataclass
class Ended:
    """What a placement's stop did to the job where the placement runs it (Slurm's scancel, Ray's stop
    endpoint): `stop_job` wraps it in a `Stopped`, and `dfdoctor stop` prints its `lines()`."""

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


@dataclass
class Stopped:
    """What a stop did: the processes it ended (each with the signal that ended it), those of the record already
    gone, those named but not proven the job's (left alone), and what is still there."""

    run: str  # the run id, or PREFIX:JOBID (slurm:42)
    where: str  # "" (this machine), "on TARGET", or the placement's ("in Slurm")
    stopped: list[dict[str, Any]] = field(default_factory=list)
    gone: list[dict[str, Any]] = field(default_factory=list)
    unproven: list[dict[str, Any]] = field(default_factory=list)
    survived: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    recorder: Optional[str] = None
    was_running: bool = False
    error: Optional[str] = None  # the stop could not be done at all (the target did not answer, scancel refused)
    placed: Optional[Ended] = None  # what a placement's scheduler did (Slurm's scancel, Ray's stop)
    chosen: str = ""  # why this run, when the user named none ("the latest run launched from DIR")

    @property
    def clean(self) -> bool:
        """Nothing of the job is left (exit 0)."""
        return self.error is None and not self.survived and self.recorder != "survived" and \
            (self.placed is None or self.placed.done)
