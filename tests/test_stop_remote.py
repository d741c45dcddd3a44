"""`dfdoctor stop RUN` of a run on a --target: the real sshd of tests/infra (ssh://root@127.0.0.1, this machine's
own processes behind it), a real 2-rank torchrun job (gloo, CPU). The stop runs there through the agent, every
process of the job ends, ranks included, and `status` from here then says the job was stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dfdoctor.run import record
from infra.fixtures import infra  # noqa: F401
from jobs.harness import PY, job, kill_runs, text_of, wait_for
from support.torch_site import torch_site
from test_stop import _job_processes, _none_left

torch_site()  # skips the file where torch is not installed (support/torch_site.py: why not importorskip)
pytestmark = pytest.mark.slow


@pytest.fixture
def folders(tmp_path: Path):
    """A folder for dfdoctor here and one for the job "there" (the same machine behind sshd): both cleaned up."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    yield here, there
    kill_runs(tmp_path)


def test_a_torchrun_job_on_an_ssh_target_is_stopped_whole(infra, folders, dfdoctor):
    here, there = folders
    env = dict(infra.env(), XDG_CACHE_HOME=str(here / "cache"))
    p = dfdoctor("launch", "--target", infra.ssh_target, "--cwd", str(there), "--python", PY, "--no-check",
                 "--watch", "3", "--settle", "0", "--format", "json", "--",
                 PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                 job("ddp_never_joins.py")[1], cwd=here, env=env, timeout=120)
    rep = json.loads(p.stdout)
    copy = Path(rep["run"]["dir"])
    assert rep["run"]["target"] == infra.ssh_target and record.load(copy).spawned, text_of(rep)
    procs = []

    def three() -> bool:
        procs[:] = _job_processes(copy)
        return len(procs) >= 3
    assert wait_for(three, 30), "torchrun and its 2 ranks did not start there"
    p = dfdoctor("stop", rep["run"]["id"], cwd=here, env=env, timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"dfdoctor stop: run {rep['run']['id']} on {infra.ssh_target}\n"), p.stdout
    assert _none_left(procs, 1.0), p.stdout
    assert all(f"stopped pid {q.pid} (SIGTERM)" in p.stdout for q in procs), p.stdout
    p = dfdoctor("status", "--format", "json", cwd=here, env=env, timeout=60)
    v = json.loads(p.stdout)["verdict"]
    assert p.returncode == 0 and v["cause"] == "stopped-by-user" and "stopped by you at" in v["summary"], v
