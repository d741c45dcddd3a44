"""The remote half of launch/status: start a job on the real chain so that it survives, look at it again."""

from __future__ import annotations

import time
import uuid

import pytest

from dfdoctor.launch import remote_run
from infra.fixtures import Infra, infra, ssh_config_env  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def work(infra: Infra):
    """A scratch folder in container 200 (path inside, path on the host's side)."""
    name = f"dfd-run-{uuid.uuid4().hex[:8]}"
    host_side = infra.rootfs() / "tmp" / name
    host_side.mkdir()
    yield f"/tmp/{name}", host_side
    infra.container(f"rm -rf /tmp/{name}")


def test_started_job_outlives_the_session_and_is_observed(ssh_config_env, work):
    infra = ssh_config_env
    inside, host_side = work
    job = ["sh", "-c", "i=0; while [ $i -lt 40 ]; do echo step $i; i=$((i+1)); sleep 0.1; done; exit 3"]
    run = remote_run.start(infra.pct_target, job, log=f"{inside}/train.log", cwd=inside,
                           strategy="nohup-setsid-f-wait", run_dir=f"{inside}/run")
    assert run.start_error is None and run.session_s < 5
    seen = remote_run.observe(run, watch_s=0.5)
    assert seen.error is None and seen.alive and seen.pid and seen.growing and seen.exit_code is None
    assert "step" in (host_side / "train.log").read_text()  # in the container, where the job runs
    deadline = time.monotonic() + 10
    while seen.alive and time.monotonic() < deadline:
        seen = remote_run.observe(run, watch_s=0.2)
    assert not seen.alive and seen.exit_code == 3


def test_stop_and_unreachable(ssh_config_env, work):
    infra = ssh_config_env
    inside, _ = work
    run = remote_run.start(infra.pct_target, ["sleep", "30"], log=f"{inside}/s.log", strategy="nohup-setsid-f-wait",
                           run_dir=f"{inside}/run")
    assert remote_run.observe(run, watch_s=0.1).alive
    remote_run.stop(run)
    time.sleep(0.3)
    seen = remote_run.observe(run, watch_s=0.1)
    assert not seen.alive
    gone = remote_run.start("ssh://root@127.0.0.1:1", ["true"], log="/tmp/x.log")
    assert gone.start_error and "Connection refused" in gone.start_error
