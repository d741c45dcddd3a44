"""cuda.nccl on this CPU machine: the same ranks, rendezvous, all-reduce and barrier with real torch.distributed
over gloo (NCCL itself needs GPUs), and the fault injection that must name the rank that hangs or fails."""

from __future__ import annotations

import os
import sys
import time

import psutil
import pytest

from dfdoctor.checks.cuda_nccl import Layout, _verdict, _world_size, cuda_nccl
from dfdoctor.checks.cuda_common import parse_visible
from dfdoctor import causes
from dfdoctor.context import Context
from dfdoctor.model import Status

PYTHON = sys.executable


def ctx_for(timeout: float = 40, command=(), **opts) -> Context:
    """A context whose cuda.nccl options are `opts`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFDOCTOR_NCCL_")}
    return Context(python=PYTHON, timeout=timeout, env=env, command=list(command),
                   config={"checks": {"cuda.nccl": opts}})


def leftovers() -> list[str]:
    """Rank probes of a gloo run started by this test session (a parallel worker's own: the Slurm pair's gloo
    tests may run at the same time on another) still running anywhere on the machine."""
    session = os.environ["DFDOCTOR_TEST_SESSION"]  # tests/conftest.py: every process a test starts inherits it
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "cuda_nccl_probe.py" not in cmd or "--rank=" not in cmd or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            env = p.environ()
            if env.get("DFDOCTOR_NCCL_BACKEND") == "gloo" and env.get("DFDOCTOR_TEST_SESSION") == session:
                out.append(cmd)
        except psutil.Error:
            continue
    return out


def test_fewer_than_two_gpus_is_a_skip_that_says_so():
    (r,) = list(cuda_nccl.func(ctx_for()))
    assert r.status is Status.SKIP and "0 GPUs visible" in r.summary and "two or more" in r.summary


def test_a_bad_option_is_an_error_that_says_which():
    (r,) = list(cuda_nccl.func(ctx_for(hang_rank="one")))
    assert r.status is Status.ERROR and "hang_rank (or DFDOCTOR_NCCL_HANG_RANK) must be a whole number" in r.summary


def test_world_size_comes_from_option_then_torchrun_then_visible_gpus():
    vis = parse_visible(None, [{"index": i, "uuid": None} for i in range(4)])
    assert _world_size(ctx_for(), vis, "nccl", 3)[0] == 3
    assert _world_size(ctx_for(command=["torchrun", "--nproc_per_node=2", "t.py"]), vis, "nccl") == \
        (2, "the launch asks for --nproc_per_node 2")
    assert _world_size(ctx_for(), vis, "nccl") == (4, "4 GPUs visible")


@pytest.mark.slow
def test_two_ranks_all_reduce_the_known_sum():
    (r,) = list(cuda_nccl.func(ctx_for(backend="gloo")))
    assert r.status is Status.OK, r.summary
    assert "2 ranks formed a group" in r.summary and "right sum (3)" in r.summary
    ranks = r.data["nccl"]["ranks"]
    assert [x["state"] for x in ranks] == ["ok", "ok"]
    assert all(x["all_reduce"]["min"] == x["all_reduce"]["max"] == 3.0 for x in ranks)
    # every rank ran with NVLink multicast off
    assert all(x["env"]["NCCL_NVLS_ENABLE"] == "0" and x["env"]["NVSHMEM_DISABLE_NVLS"] == "1" for x in ranks)


@pytest.mark.slow
def test_hanging_rank_is_named_within_the_timeout_and_nothing_is_left():
    t = time.monotonic()
    (r,) = list(cuda_nccl.func(ctx_for(timeout=14, backend="gloo", hang_rank=1)))
    elapsed = time.monotonic() - t
    assert r.status is Status.FAIL and r.cause == causes.NCCL_HANG
    assert r.summary.startswith("rank 1 hung in stage 'injected hang before init_process_group'"), r.summary
    assert "rank 0 waited for it" in r.summary
    assert any("stuck at" in e and "cuda_nccl_probe.py" in e for e in r.evidence)
    assert elapsed < 14 + 1, elapsed
    states = {x["rank"]: x["state"] for x in r.data["nccl"]["ranks"]}
    assert states == {0: "waited", 1: "hung"}
    assert r.data["nccl"]["ranks"][0]["waited_for"] == [1]
    assert not leftovers()


@pytest.mark.slow
def test_failing_rank_is_named_and_the_others_are_stopped_early():
    t = time.monotonic()
    (r,) = list(cuda_nccl.func(ctx_for(timeout=60, backend="gloo", fail_rank=0)))
    elapsed = time.monotonic() - t
    assert r.status is Status.FAIL and r.cause == causes.NCCL_FAILED
    assert r.summary.startswith("rank 0 failed in injected failure before init_process_group"), r.summary
    assert "rank 1 stopped waiting for it" in r.summary
    assert elapsed < 20, f"the waiting rank should give up as soon as rank 0 failed, took {elapsed:.1f} s"
    (waiter,) = [x for x in r.data["nccl"]["ranks"] if x["rank"] == 1]
    assert waiter["state"] == "waited" and waiter["waited_for"] == [0]
    assert "injected failure" in waiter["error"]
    assert not leftovers()


def _rank(rank, state, stage, **kw):
    return {"rank": rank, "gpu": rank, "state": state, "stage": stage, "duration_s": 1.0, "stages": [], **kw}


def test_verdict_when_every_rank_hangs_in_the_collective():
    ranks = [_rank(0, "hung", "all_reduce"), _rank(1, "hung", "all_reduce")]
    r = _verdict(ranks, Layout.over(None, 2), "nccl", 30, {})
    assert r.cause == causes.NCCL_HANG and r.summary == "all 2 ranks hung in all_reduce after 30 s"


def test_verdict_names_the_rank_that_got_least_far():
    ranks = [_rank(0, "hung", "init_process_group"), _rank(1, "hung", "cuda device"), _rank(2, "waited", "rendezvous")]
    r = _verdict(ranks, Layout.over(None, 3), "nccl", 30, {})
    assert r.summary.startswith("rank 1 (GPU 1) hung in stage 'cuda device'")
    assert "rank 0 (GPU 0), rank 2 (GPU 2) waited for it" in r.summary


def test_verdict_on_a_wrong_sum_is_a_failure():
    ranks = [_rank(0, "ok", "done", all_reduce={"expected": 3.0, "min": 3.0, "max": 3.0, "seconds": 0.01}),
             _rank(1, "wrong", "done", all_reduce={"expected": 3.0, "min": 1.0, "max": 3.0, "seconds": 0.01})]
    r = _verdict(ranks, Layout.over(None, 2), "nccl", 30, {})
    assert r.status is Status.FAIL and "rank 1 (GPU 1)" in r.summary and "expected 3.0" in r.summary
    assert "NCCL_P2P_DISABLE=1" in r.fix


@pytest.mark.slow
def test_a_taken_rendezvous_port_is_named_with_its_fix(monkeypatch):
    """Rank 0's store cannot listen (another process holds the port): rank 0 fails in rendezvous with the
    operating system's EADDRINUSE, rank 1 is told apart as waiting, and the fix speaks of the port."""
    import socket

    from dfdoctor.checks import cuda_nccl as module
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        monkeypatch.setattr(module, "_free_port", lambda ctx: holder.getsockname()[1])
        # rank 1 waits its whole budget; rank 0 must import torch within it to reach its rendezvous: under load
        # (2 cores, a full test run) that import alone took more than the 8 s this budget was
        (r,) = list(cuda_nccl.func(ctx_for(timeout=20, backend="gloo")))
    assert r.status is Status.FAIL and r.cause == causes.NCCL_FAILED
    assert r.summary.startswith("rank 0 failed in rendezvous") and "EADDRINUSE" in r.summary, r.summary
    assert "port" in r.fix and "taken" in r.fix
    assert not leftovers()
