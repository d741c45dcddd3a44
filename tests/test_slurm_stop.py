"""`dfdoctor stop` of a Slurm job on the real single-node Slurm (tests/infra/slurm.sh): scancel, then Slurm's word
that nothing of it runs; the job's processes on the node (this machine) are gone, and `status` says who stopped
it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor.agent.procfs import environ
from infra.slurm_fixtures import slurm  # noqa: F401

DFDOCTOR = [sys.executable, "-m", "dfdoctor"]


def _dfd(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(DFDOCTOR + list(args), cwd=cwd, capture_output=True, text=True, timeout=120)


def _on_the_node(job_id: str) -> list[psutil.Process]:
    """The job's processes on the node (this machine): those whose environment names its SLURM_JOB_ID."""
    out = []
    for p in psutil.process_iter():
        try:
            if (environ(p.pid) or {}).get("SLURM_JOB_ID") == job_id and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _script(tmp: Path) -> None:
    (tmp / "job.sbatch").write_text("#!/bin/bash\necho started\nsleep 120\n")


def test_a_slurm_run_is_scancelled_and_status_says_you_stopped_it(slurm, tmp_path):
    _script(tmp_path)
    # a short watch: what launch says of the job is not the point here (a quiet job's 30 s watch was), its run is
    p = _dfd("launch", "--no-check", "--watch", "5", "--format", "json", "--", "sbatch", "-o", "o-%j.log",
             "job.sbatch", cwd=tmp_path)
    rep = json.loads(p.stdout)
    job = rep["run"]["slurm"]["job_id"]
    try:
        assert slurm.wait_state(job, ("RUNNING",)) == "RUNNING"
        end = time.monotonic() + 10
        while not _on_the_node(job) and time.monotonic() < end:
            time.sleep(0.2)
        procs = _on_the_node(job)
        assert procs, "the batch script does not run on the node"
        p = _dfd("stop", rep["run"]["id"], cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"cancelled Slurm job {job} (it was RUNNING); Slurm now says CANCELLED" in p.stdout, p.stdout
        assert "nothing of the job is left" in p.stdout
        assert job not in subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
        assert not [q for q in procs if q.is_running() and q.status() != psutil.STATUS_ZOMBIE]
        p = _dfd("status", "--format", "json", rep["run"]["id"], cwd=tmp_path)
        v = json.loads(p.stdout)["verdict"]
        assert p.returncode == 0 and v["cause"] == "stopped-by-user", v
        assert v["summary"].startswith("The job was stopped by you at ") and f"scancel of Slurm job {job}" in \
            "\n".join(v["evidence"]), v
    finally:
        slurm.cancel(job)


def test_any_slurm_job_is_stopped_by_its_id_and_an_ended_one_is_left_as_it_is(slurm, tmp_path):
    _script(tmp_path)
    job = slurm.sbatch("-o", "o-%j.log", "job.sbatch", cwd=tmp_path)
    try:
        assert slurm.wait_state(job, ("RUNNING",)) == "RUNNING"
        p = _dfd("stop", f"slurm:{job}", cwd=tmp_path)
        assert p.returncode == 0 and f"cancelled Slurm job {job} (it was RUNNING)" in p.stdout, p.stdout
        p = _dfd("stop", f"slurm:{job}", cwd=tmp_path)
        assert p.returncode == 0 and f"Slurm job {job} was already cancelled: nothing to cancel" in p.stdout, p.stdout
    finally:
        slurm.cancel(job)
    p = _dfd("stop", "slurm:x1", cwd=tmp_path)
    assert p.returncode == 2 and "a Slurm job id is a number" in p.stderr, p.stderr
