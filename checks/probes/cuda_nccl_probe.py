"""Probe for cuda.nccl: ONE rank of a small collective test, run in the training interpreter.

dfdoctor starts one of these per GPU (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT in the
environment, like torchrun). Each rank meets the others through a TCPStore, creates the process group, all-
reduces a tensor whose sum it knows, and passes a barrier. The answer is rewritten at every stage, so a rank
killed at the deadline still says where it was. DFDOCTOR_NCCL_HANG=1 / DFDOCTOR_NCCL_FAIL=1 make this rank
hang / raise before init_process_group (fault injection, for testing the check itself).
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import _probe_support as support

T0 = time.monotonic()
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", str(RANK)))
BACKEND = os.environ.get("DFDOCTOR_NCCL_BACKEND", "nccl")
DEADLINE = float(os.environ.get("DFDOCTOR_NCCL_DEADLINE", "0")) or time.time() + 60
STATE: dict = {"rank": RANK, "world_size": WORLD, "local_rank": LOCAL_RANK, "backend": BACKEND, "pid": os.getpid(),
               "stage": "start", "stages": [], "env": {k: os.environ.get(k) for k in (
                   "CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                   "NVSHMEM_DISABLE_NVLS", "NCCL_SOCKET_IFNAME", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE")}}


def stage(name: str) -> None:
    """Enter a stage and publish it."""
    STATE["stage"] = name
    STATE["stages"].append([name, round(time.monotonic() - T0, 3)])
    support.answer(STATE)


def left(reserve: float = 2.0) -> float:
    """Seconds until the check's deadline, less a reserve so this rank can still report its own timeout."""
    return max(1.0, DEADLINE - time.time() - reserve)


def main() -> int:
    """Rendezvous, init the group, all-reduce a known sum, barrier, tear down; publish after each step."""
    support.install_stack_dump()
    stage("import torch")
    try:
        import datetime

        import torch
        import torch.distributed as dist
        STATE["torch"] = torch.__version__
        if BACKEND == "nccl":
            stage("cuda device")
            count = torch.cuda.device_count() if torch.version.cuda else 0
            if LOCAL_RANK >= count:
                why = "a CPU-only torch build" if not torch.version.cuda else \
                    (f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}"
                     if "CUDA_VISIBLE_DEVICES" in os.environ else "CUDA_VISIBLE_DEVICES is not set")
                raise RuntimeError(f"rank {RANK} needs GPU {LOCAL_RANK}, but torch sees {count} GPU(s) ({why})")
            torch.cuda.set_device(LOCAL_RANK)
            device = torch.device("cuda", LOCAL_RANK)
            torch.ones(1, device=device)
            STATE["gpu"] = torch.cuda.get_device_name(LOCAL_RANK)
            try:
                STATE["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:
                pass
        else:
            device = torch.device("cpu")
        if os.environ.get("DFDOCTOR_NCCL_FAIL") == "1":
            STATE["injected_fail"] = True
            stage("injected failure before init_process_group")
            raise RuntimeError("injected failure (DFDOCTOR_NCCL_FAIL_RANK)")
        if os.environ.get("DFDOCTOR_NCCL_HANG") == "1":
            STATE["injected_hang"] = True
            stage("injected hang before init_process_group")
            while True:  # DFDOCTOR_NCCL_HANG_RANK asked for this rank to hang; dfdoctor kills it at the deadline
                time.sleep(3600)
        stage("rendezvous")
        store = dist.TCPStore(os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]), WORLD,
                              is_master=RANK == 0, timeout=datetime.timedelta(seconds=left()),
                              wait_for_workers=True)
        stage("init_process_group")
        kwargs = dict(backend=BACKEND, store=store, rank=RANK, world_size=WORLD,
                      timeout=datetime.timedelta(seconds=left()))
        if BACKEND == "nccl":
            kwargs["device_id"] = device  # eager communicator init: a broken NCCL shows up here, not later
        try:
            dist.init_process_group(**kwargs)
        except TypeError:
            kwargs.pop("device_id", None)
            dist.init_process_group(**kwargs)
        stage("all_reduce")
        t = time.monotonic()
        x = torch.full((1 << 16,), float(RANK + 1), device=device)
        dist.all_reduce(x)
        if BACKEND == "nccl":
            torch.cuda.synchronize(device)
        expected = WORLD * (WORLD + 1) / 2
        STATE["all_reduce"] = {"expected": expected, "min": float(x.min().item()), "max": float(x.max().item()),
                               "seconds": round(time.monotonic() - t, 4)}
        STATE["correct"] = STATE["all_reduce"]["min"] == expected == STATE["all_reduce"]["max"]
        stage("barrier")
        if BACKEND == "nccl":
            dist.barrier(device_ids=[LOCAL_RANK])
        else:
            dist.barrier()
        stage("destroy_process_group")
        dist.destroy_process_group()
    except BaseException as exc:
        STATE["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:1000]
        STATE["traceback"] = traceback.format_exc()[-3000:]
        STATE["failed_stage"] = STATE["stage"]
    stage("done")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: NCCL's destructors can hang after a failed collective
