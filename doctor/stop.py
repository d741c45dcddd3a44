"""`dfdoctor stop [RUN]`: end every process of a run's job, where it runs, and write the stop into its run folder.

Where: this machine (the agent's `stop` part runs in this process), the run's --target (the same part, sent
there over one session), or a placement's scheduler (Slurm's `scancel`, Ray's stop endpoint:
`dfdoctor.placements`). Which processes are the job's is proven where they run (`dfdoctor.agent.stop`), never
taken from the run folder's word. The stop is noted in the run folder's launcher.jsonl ("stopped"), which
`status` reads to say "stopped by you at HH:MM" (cause `stopped-by-user`, `dfdoctor.diagnose.stopped`). The
CLI only prints what `stop_run` returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from dfdoctor.agent import stop as agent_stop
from dfdoctor.context import Context
from dfdoctor.engine import target_connection
from dfdoctor.launch import remote_run
from dfdoctor.placing import Ended, Placement
from dfdoctor import placements
from dfdoctor.run import index, record
from dfdoctor.run.folder import RunFolder, RunNotFound, find_run, latest_from

GRACE_S = agent_stop.GRACE_S


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


def stop_run(cwd: Path, ref: Optional[str], grace_s: float = GRACE_S) -> Stopped:
    """Stop the job of the run `ref` names (`PREFIX:JOBID` for any job of a placement: slurm:42, ray:ID). None:
    the latest run launched from `cwd`, never one launched elsewhere (status may look at your latest anywhere; a
    stop ends a job, so it takes only what this folder launched, and says which)."""
    named = placements.of_prefix(ref)
    if named is not None and ref:
        return _placed(named, ref, named.job_of(ref), grace_s, None, None)
    if ref:
        return _stop(find_run(cwd, ref), grace_s)
    run_dir = latest_from(cwd)
    if run_dir is None:
        elsewhere = index.latest()
        raise RunNotFound(f"no run was launched from {cwd}, so none is stopped: name the one to stop, `dfdoctor "
                          "stop RUN`" + (f" (your latest run anywhere is {elsewhere}: `dfdoctor stop {elsewhere.name}`)"
                                         if elsewhere is not None else ""))
    out = _stop(run_dir, grace_s)
    out.chosen = f"the latest run launched from {cwd}"
    return out


def _stop(run_dir: Path, grace_s: float) -> Stopped:
    """Stop the job of the run in `run_dir`, where it runs."""
    run = record.load(run_dir)
    placement = placements.of_spec(run.spec)
    if placement is not None:
        job_id = placement.job_in_spec(run.spec)
        if not job_id:
            return Stopped(run.id, placement.where,
                           error=f"{placement.submitter} refused this job: nothing was submitted")
        return _placed(placement, run.id, job_id, grace_s, run_dir, run.spec)
    if run.is_remote and not run.spec.get("remote_dir"):
        return Stopped(run.id, f"on {run.target}", error="its recorder never started there: no job to stop")
    if run.is_remote:
        target = run.target
        with target_connection(Context(target=target)):
            answer = remote_run.stop(target, run.spec["remote_dir"], python=run.spec.get("remote_python") or
                                     "python3", grace_s=grace_s)
            fetched = remote_run.fetch(target, run.spec["remote_dir"],
                                       python=run.spec.get("remote_python") or "python3", full=True)
        if "error" not in fetched:  # the record's last words (the job's end) into the local copy
            record.mirror(run_dir, fetched)
        where = f"on {target}"
    else:
        answer, where = agent_stop.stop(str(run_dir), grace_s), ""
    if "error" in answer:
        return Stopped(run.id, where, error=answer["error"])
    answer = _masked(run_dir, answer)
    out = Stopped(run.id, where, answer["stopped"], answer["gone"], answer["unproven"], answer["survived"],
                  answer["errors"], answer["recorder"], bool(answer["was_running"] and answer["stopped"]))
    _note(run_dir, out, grace_s)
    return out


def _placed(placement: Placement, run: str, job_id: str, grace_s: float, run_dir: Optional[Path],
            spec: Optional[dict[str, Any]]) -> Stopped:
    """The placement's own stop (scancel), waited for; noted in the run folder when there is one."""
    c = placement.stop(job_id, grace_s, spec)
    out = Stopped(run, placement.where, was_running=c.was_running and not c.said, placed=c, error=c.said or None)
    if run_dir is not None and not c.said:
        _note(run_dir, out, grace_s)
    return out


def _masked(run_dir: Path, answer: dict[str, Any]) -> dict[str, Any]:
    """The agent's answer with the launch's secrets masked: it names processes by their raw command lines."""
    folder = RunFolder.at(run_dir)
    red = folder.masker()
    red.learn_prints(folder.prints, answer)
    for e in answer.get("stopped") or []:
        red.learn_argv((e.get("cmdline") or "").split())
    return red.value(answer)


def _note(run_dir: Path, out: Stopped, grace_s: float) -> None:
    """The stop in the run folder's notes: what `status` says of the run afterwards."""
    RunFolder.at(run_dir).append_event(
        "stopped", by="dfdoctor stop", grace_s=grace_s, was_running=out.was_running, recorder=out.recorder,
        stopped=[{k: p.get(k) for k in ("pid", "cmdline", "signal", "why")} for p in out.stopped],
        survived=[{k: p.get(k) for k in ("pid", "cmdline")} for p in out.survived],
        **(out.placed.note() if out.placed is not None else {}))

