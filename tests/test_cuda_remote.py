"""The GPU checks where the job runs elsewhere: a real LXC container behind `pct exec` over real ssh
(tests/infra/provision.sh). The probes must run in the container's interpreter, not on this machine."""

from __future__ import annotations

import os

import pytest

from dfdoctor.checks.cuda_init import cuda_init
from dfdoctor.checks.cuda_nccl import cuda_nccl
from dfdoctor import Status, causes
from dfdoctor.context import Context
from dfdoctor.targets import parse_target
from infra.fixtures import Infra, infra, ssh_config_env  # noqa: F401

pytestmark = pytest.mark.slow


def test_cuda_init_runs_in_the_container(ssh_config_env: Infra) -> None:
    ctx = Context(python="python3", target=parse_target(ssh_config_env.pct_target), timeout=30, require_gpu=True)
    (r,) = list(cuda_init.run(ctx))
    assert r.status is Status.FAIL and r.cause == causes.CUDA_UNAVAILABLE, r
    # this machine's venv has a (CPU) torch; the container's python3 has none, so the answer came from there
    assert "torch is not installed in the training interpreter (python3)" in r.summary
    assert r.data["cuda"]["stage"] == "done"
    assert r.data["cuda"]["host"] != os.uname().nodename, "the probe ran on this machine, not in the container"


def test_cuda_nccl_lists_the_containers_gpus(ssh_config_env: Infra) -> None:
    ctx = Context(python="python3", target=parse_target(ssh_config_env.pct_target), timeout=30)
    (r,) = list(cuda_nccl.run(ctx))
    assert r.status is Status.SKIP and "0 GPUs visible" in r.summary, r
