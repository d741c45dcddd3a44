"""The tests that take the single-node Slurm from every other test (tests/infra/slurm.sh): a job preempted by a
partition of higher priority, a partition too busy to start a job, a node that stops answering. Each needs the
whole node: the urgent job, the hog take all its CPUs; a failed node fails every job on it. They hold the cluster
alone, all three in one go (tests/infra/slurm_fixtures.py): the tests beside them wait once, not three times."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from infra.slurm_fixtures import slurm_alone  # noqa: F401
from test_slurm import cancel_leftover_jobs, dfd, job_of, job_script  # noqa: F401


def test_preempted_by_a_higher_priority_partition(slurm_alone, tmp_path):
    """Alone on the node: the urgent job takes every CPU, so it would preempt other tests' jobs too."""
    slurm = slurm_alone
    low = slurm.sbatch("-p", slurm.partition, "-c", str(slurm.cpus), "--mem=100M", "-o", "low-%j.log",
                       "--no-requeue", "--wrap", "sleep 60", cwd=tmp_path)
    slurm.wait_state(low, ("RUNNING",))
    high = slurm.sbatch("-p", slurm.urgent, "-c", str(slurm.cpus), "--mem=100M", "-o", "high-%j.log",
                        "--wrap", "sleep 1", cwd=tmp_path)
    try:
        slurm.wait_state(low, ("PREEMPTED", "CANCELLED"), timeout=30)
        rc, doc, _ = dfd("status", f"slurm:{low}", cwd=tmp_path)
        assert doc["verdict"]["cause"] == "preempted", doc["verdict"]
    finally:
        slurm.cancel(low, high)
        slurm.wait_state(high, ("CANCELLED", "COMPLETED"))  # the node is free again for the tests beside


@pytest.mark.slow
def test_node_failure(slurm_alone, tmp_path):
    """slurmd stopped (SIGSTOP) for longer than SlurmdTimeout: slurmctld marks the node down and the job
    NODE_FAIL; the node comes back (ReturnToService=2) once slurmd answers again. Alone on the cluster: every
    job on the node fails with it."""
    import signal
    slurm = slurm_alone
    job = slurm.sbatch("--no-requeue", "-o", "nf-%j.log", "--wrap", "echo start; sleep 120", cwd=tmp_path)
    slurm.wait_state(job, ("RUNNING",))
    pid = int((slurm.dir / "slurmd.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        assert slurm.wait_state(job, ("NODE_FAIL",), timeout=90) == "NODE_FAIL"
    finally:
        os.kill(pid, signal.SIGCONT)
        end = time.monotonic() + 60
        while time.monotonic() < end and subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True,
                                                        text=True).stdout.split()[:1] != ["idle"]:
            time.sleep(0.5)
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    assert rc == 1 and doc["verdict"]["cause"] == "node-failure", doc["verdict"]


def test_busy_partition_pends_for_resources_and_check_falls_back_to_the_submit_host(slurm_alone, tmp_path):
    """Alone on the node: the hog takes every CPU of it."""
    slurm = slurm_alone
    hog = slurm.sbatch("-c", str(slurm.cpus), "--mem=100M", "-o", "hog-%j.log", "--wrap", "sleep 60", cwd=tmp_path)
    slurm.wait_state(hog, ("RUNNING",))
    s = job_script(tmp_path, "echo hi\n")
    rc, doc, _ = dfd("launch", "--no-check", "--watch", "3", "--", "sbatch", "-o", "o-%j.log", str(s), cwd=tmp_path)
    try:
        assert rc == 0 and doc["verdict"]["state"] == "pending" and doc["verdict"]["cause"] is None
        assert "Resources" in doc["verdict"]["summary"] or "Priority" in doc["verdict"]["summary"]
    finally:
        slurm.cancel(job_of(doc))
    # No node can be had at once: the folders are looked at here, said so, and a missing one only warns.
    rc, doc, _ = dfd("check", "--only", "slurm.output", "--", "sbatch", "-o", "gone/o.log", str(s), cwd=tmp_path)
    out = next(c for c in doc["checks"] if c["id"] == "slurm.output")
    assert out["status"] == "warn" and out["cause"] == "log-dir-missing" and "submit host" in out["summary"]
    assert "may not share this file system" in json.dumps(out)
    slurm.cancel(hog)
    slurm.wait_state(hog, ("CANCELLED",))
