"""`dfdoctor stop [RUN]`: end every process of a run's job, where it runs, and write the stop into its run folder.

Where: this machine (the agent's `stop` part runs in this process), the run's --target (the same part, sent
there over one session), or a placement's scheduler (Slurm's `scancel`, Ray's stop endpoint): each placement's
`stop_run`/`stop_job` (`dfdoctor.placements`) says how. Which processes are the job's is proven where they run (`dfdoctor.agent.stop`), never
taken from the run folder's word. The stop is noted in the run folder's launcher.jsonl ("stopped"), which
`status` reads to say "stopped by you at HH:MM" (cause `stopped-by-user`, `dfdoctor.diagnose.stopped`). The
CLI only prints what `stop_run` returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from dfdoctor.agent import stop as agent_stop
from dfdoctor import placements
from dfdoctor.placing_answers import Stopped
from dfdoctor.run import index, record
from dfdoctor.run.folder import RunFolder, RunNotFound, find_run, latest_from

GRACE_S = agent_stop.GRACE_S


def stop_run(cwd: Path, ref: Optional[str], grace_s: float = GRACE_S) -> Stopped:
    """Stop the job of the run `ref` names (`PREFIX:JOBID` for any job of a placement: slurm:42, ray:ID). None:
    the latest run launched from `cwd`, never one launched elsewhere (status may look at your latest anywhere; a
    stop ends a job, so it takes only what this folder launched, and says which)."""
    named = placements.of_prefix(ref)
    if named is not None and ref:
        return named.stop_job(ref, named.job_of(ref), grace_s)
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
    """Stop the job of the run in `run_dir`, where it runs (the placement that made the run says how); a stop
    that was done is noted in the run folder."""
    run = record.load(run_dir)
    out = placements.of_spec(run.spec).stop_run(run_dir, run, grace_s)
    if out.error is None:
        _note(run_dir, out, grace_s)
    return out


def _note(run_dir: Path, out: Stopped, grace_s: float) -> None:
    """The stop in the run folder's notes: what `status` says of the run afterwards."""
    RunFolder.at(run_dir).append_event(
        "stopped", by="dfdoctor stop", grace_s=grace_s, was_running=out.was_running, recorder=out.recorder,
        stopped=[{k: p.get(k) for k in ("pid", "cmdline", "signal", "why")} for p in out.stopped],
        survived=[{k: p.get(k) for k in ("pid", "cmdline")} for p in out.survived],
        **(out.placed.note() if out.placed is not None else {}))
