"""cuda.nccl on this CPU machine: the same ranks, rendezvous, all-reduce and barrier with real torch.distributed
over gloo (NCCL itself needs GPUs), and the fault injection that must name the rank that hangs or fails."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor.checks.cuda_nccl import Layout, _verdict, _world_size, cuda_nccl
from dfdoctor.checks.cuda_common import parse_visible
from dfdoctor import causes
from dfdoctor.context import Context
from dfdoctor.model import Status
from support.torch_imports import cpu_only_torch, marking, unreadable_build

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
def test_an_nccl_job_on_a_cpu_only_torch_gets_the_ranks_verdict_without_starting_them(tmp_path):
    """Round 23: a job whose ranks form an NCCL group, on a torch whose version.py says CPU-only, had each rank import
    torch (1.5-2 CPU-s each) only to say it sees no GPU. Now the build, read where the job runs, says so and no
    process imports torch; the same torch imported through a folder without its version.py (its build unread) still
    starts the ranks, and their verdict is the same in every word: status, cause, summary, fix, each rank's error."""
    build = cpu_only_torch()
    extra, marks = marking(tmp_path)
    (tmp_path / "train.py").write_text("import torch.distributed as dist\ndist.init_process_group('nccl')\n")
    started = {"PYTHONPATH": f"{unreadable_build(tmp_path)}:{extra['PYTHONPATH']}"}
    torchrun = str(Path(PYTHON).parent / "torchrun")
    found = {}
    for how, more in (("read", {}), ("ranks", started)):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DFDOCTOR_NCCL_")}
        ctx = Context(python=PYTHON, cwd=tmp_path, timeout=120, env={**env, **extra, **more},
                      command=[torchrun, "--nproc_per_node", "2", "train.py"])
        (found[how],) = list(cuda_nccl.func(ctx))
        assert bool(os.listdir(marks)) is (how == "ranks"), (how, os.listdir(marks))
    read, ran = found["read"], found["ranks"]
    assert (read.status, read.cause, read.summary, read.fix, read.basis) == \
        (ran.status, ran.cause, ran.summary, ran.fix, ran.basis)
    assert read.status is Status.FAIL and read.cause == causes.NCCL_FAILED and "a CPU-only torch build" in read.summary
    assert "this torch has no CUDA" in read.fix, read.fix
    fields = ("rank", "node", "gpu", "stage", "state", "error", "waited_for", "injected_hang", "injected_fail")
    assert [{k: r[k] for k in fields} for r in read.data["nccl"]["ranks"]] == \
        [{k: r[k] for k in fields} for r in ran.data["nccl"]["ranks"]]
    assert read.evidence[0] == ran.evidence[0] and read.data["nccl"]["torch_build"] == build
    assert any("read from torch/version.py" in e and "no rank was started" in e for e in read.evidence), read.evidence


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
def test_a_port_taken_before_rank_0_listens_is_our_race_and_the_group_forms_on_another(monkeypatch):
    """Round 22's CI: the port dfdoctor chose was taken before rank 0's store listened (EADDRINUSE), rank 1 waited
    111 s for a store that never came, and a healthy job failed nccl-failed. The port is dfdoctor's choice, not a
    fact about the job: rank 0 says so to the waiting ranks at once, and the group is formed again elsewhere."""
    import socket

    from dfdoctor.checks import cuda_nccl as module
    chosen = module._free_port
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        ports = iter([held])
        monkeypatch.setattr(module, "_free_port", lambda ctx: next(ports, None) or chosen(ctx))
        t0 = time.monotonic()
        (r,) = list(cuda_nccl.func(ctx_for(timeout=60, backend="gloo")))
        took = time.monotonic() - t0
    assert r.status is Status.OK, (r.summary, r.evidence)
    assert r.data["nccl"]["ports_taken"] == [held]
    assert any(f"port {held} was taken" in line for line in r.evidence), r.evidence
    assert took < 40, took  # rank 1 stopped waiting when rank 0 said it had no store, not at its 60 s deadline
    assert not leftovers()


def test_ports_taken_every_time_are_an_error_of_the_check_never_the_jobs_failure(monkeypatch):
    """Every port dfdoctor chose is held by another program: no group could be formed, which says nothing about
    the job, so the check errs (it could not run) and names the ports; three tries, each with a folder the ranks
    share for rank 0's word. (The ranks' side of a taken port runs for real in the test above; here a group is
    what the probes answer when rank 0 cannot listen, so the three tries cost no torch.)"""
    from dfdoctor.checks import cuda_nccl as module
    from dfdoctor.command import ProbeOutcome
    ports, tried = iter([23456, 23457, 23458, 23459]), []

    def group(ctx, layout, backend, faults, port, timeout, signals):
        tried.append((port, bool(signals) and os.path.isdir(signals)))
        said = f"DistNetworkError: port: {port}, code: -98, name: EADDRINUSE, message: address already in use"
        rank0 = {"stage": "done", "failed_stage": "rendezvous", "error": said}
        rank1 = {"stage": "done", "failed_stage": "rendezvous", "waited_for": [0],
                 "error": f"OtherRanks: rank 0 could not open its store at 127.0.0.1:{port}: {said}"}
        return [ProbeOutcome(["rank"], 0, "", "", 0.5, payload=p) for p in (rank0, rank1)]

    monkeypatch.setattr(module, "_free_port", lambda ctx: next(ports))
    monkeypatch.setattr(module, "_run_group", group)
    (r,) = list(cuda_nccl.func(ctx_for(timeout=60, backend="gloo")))
    assert r.status is Status.ERROR and r.cause != causes.NCCL_FAILED, (r.status, r.summary)
    assert tried == [(23456, True), (23457, True), (23458, True)]
    assert r.data["nccl"]["ports_taken"] == [23456, 23457, 23458] and "23456, 23457, 23458" in r.summary


def test_the_port_chosen_here_lies_outside_the_range_the_kernel_hands_to_connections():
    """A port from the ephemeral range (binding port 0) can be handed to any outgoing connection before rank 0
    listens; one below it is taken only by a program that binds it on purpose."""
    from dfdoctor.checks import cuda_nccl as module
    low = module._ephemeral_low()
    ports = {module._free_port(ctx_for()) for _ in range(20)}
    assert all(20000 <= p < low for p in ports), ports


def test_a_taken_port_over_a_slurm_step_fails_with_the_fix_that_names_the_port():
    """Over a Slurm step the port follows the job and step ids, as the job's own would: rank 0 meeting it taken is
    an observed failure there (not dfdoctor's choice to retry), and the fix speaks of the port and the next step."""
    from dfdoctor.slurm.step import Step
    step = Step("41", "0", ("n1", "n2"), 0, "10.0.0.1")
    err = ("DistNetworkError: The server socket has failed to listen on any local network address. port: 29501, "
           "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    ranks = [_rank(0, "error", "rendezvous", error=err, node="n1"),
             _rank(1, "waited", "rendezvous", waited_for=[0], node="n2")]
    r = _verdict(ranks, Layout.over(step, 2), "gloo", 30, {})
    assert r.status is Status.FAIL and r.cause == causes.NCCL_FAILED
    assert r.summary.startswith("rank 0 (n1, GPU 0) failed in rendezvous") and "EADDRINUSE" in r.summary, r.summary
    assert "port" in r.fix and "taken" in r.fix and "Slurm" in r.fix
