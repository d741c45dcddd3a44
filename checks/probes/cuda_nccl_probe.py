"""Probe for cuda.nccl: ONE rank of a small collective test, run in the training interpreter.

dfdoctor starts one of these per GPU (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT in the
environment, like torchrun). Each rank first joins a TCPStore, then readies its GPU and says so in the
store; a rank whose GPU fails says that instead, so the others stop waiting at once and name it. Then the
process group, an all-reduce whose sum every rank knows, and a barrier. The answer is rewritten at every
stage, so a rank killed at the deadline still says where it was.

DFDOCTOR_NCCL_HANG=1 / DFDOCTOR_NCCL_FAIL=1 make this rank hang / raise before init_process_group (fault
injection, for testing the check itself). `--list-gpus` only lists the GPUs the driver knows and reads the torch
build from torch/version.py, as cuda.init's probe does (`_torch_build`; no torch imported): a CPU-only build has no
NCCL, so dfdoctor starts no rank only for it to import torch and find no GPU.
"""

import errno
import glob
import os
import re
import socket
import sys
import threading
import time
import traceback
from typing import List, Tuple

import _probe_support as support

T0 = time.monotonic()
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", str(RANK)))
BACKEND = os.environ.get("DFDOCTOR_NCCL_BACKEND", "nccl")
USES_NCCL = "nccl" in BACKEND.lower()  # "nccl", or a device map such as "cuda:nccl,cpu:gloo"
LOCAL_WORLD = int(os.environ.get("LOCAL_WORLD_SIZE", str(WORLD)))
# In one group over a Slurm allocation: this node's place, and every node's name in order (else unset).
NODE = int(os.environ.get("DFDOCTOR_NCCL_NODE", "0"))
NODE_NAMES = [n for n in os.environ.get("DFDOCTOR_NCCL_NODE_NAMES", "").split(",") if n]
# A folder that this node's ranks share, where dfdoctor runs them here: rank 0 that could not open the store says
# so in it, for the ranks that wait to connect (else unset: they learn it only from their own deadline).
SIGNALS = os.environ.get("DFDOCTOR_NCCL_SIGNALS", "")
NO_STORE = "rank0-no-store"
# seconds this rank may take in all; relative, because the target's clock need not match dfdoctor's
BUDGET = float(os.environ.get("DFDOCTOR_NCCL_BUDGET", "60"))


def _late() -> float:
    """Seconds between dfdoctor's request and this rank's start, when dfdoctor runs on this machine (it then says
    when it sent it: one clock). A rank forked by the probe server waits for it to import torch first, which on a
    loaded node took seconds: counting from its own start it overran dfdoctor's deadline and was killed as hung."""
    try:
        return min(max(0.0, time.time() - float(os.environ["DFDOCTOR_NCCL_SENT_AT"])), BUDGET)
    except (KeyError, ValueError):
        return 0.0


BUDGET -= _late()
STATE: dict = {"rank": RANK, "world_size": WORLD, "local_rank": LOCAL_RANK, "backend": BACKEND, "pid": os.getpid(),
               "stage": "start", "stages": [], "env": {k: os.environ.get(k) for k in (
                   "CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                   "NVSHMEM_DISABLE_NVLS", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_P2P_DISABLE",
                   "NCCL_IB_DISABLE")}}


class OtherRanks(RuntimeError):
    """This rank gave up because of other ranks: one failed, or some never got ready in time."""


class Unreachable(RuntimeError):
    """This rank could not reach rank 0's store: its TCP connections got no answer, or no route (observed)."""


TRY_S = 3.0  # a TCP SYN to a live node is answered in milliseconds: 3 s of silence means it was dropped


def rank0_without_store() -> str:
    """What rank 0 said when it could not open the store, if it said so in the shared folder ('' if not)."""
    if not SIGNALS:
        return ""
    try:
        with open(os.path.join(SIGNALS, NO_STORE)) as f:
            return f.read() or "it gave no reason"
    except OSError:
        return ""


def say_no_store(error: str) -> None:
    """Rank 0 tells the ranks waiting to connect that no store will listen (see rank0_without_store)."""
    if not SIGNALS:
        return
    try:
        with open(os.path.join(SIGNALS, NO_STORE + ".part"), "w") as f:
            f.write(error)
        os.replace(os.path.join(SIGNALS, NO_STORE + ".part"), os.path.join(SIGNALS, NO_STORE))
    except OSError:
        pass


def stop_if_rank0_has_no_store(addr: str, port: int, joined: threading.Event) -> None:
    """Until this rank has joined the store, stop it as soon as rank 0 says it could not open one. The wait may be
    inside torch: a program that holds the port and accepts connections keeps the TCPStore client waiting for an
    answer that never comes (round 22's CI: 111 s for a port taken between dfdoctor's choice and rank 0's listen)."""
    if not SIGNALS:
        return

    def run() -> None:
        while not joined.wait(0.2):
            gone = rank0_without_store()
            if gone:
                STATE.update(waited_for=[0], failed_stage="rendezvous",
                             error=f"OtherRanks: rank 0 could not open its store at {addr}:{port}: {gone}"[:1000])
                stage("done")
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)

    threading.Thread(target=run, name="dfdoctor-no-store", daemon=True).start()


def reach_store(addr: str, port: int) -> None:
    """Before this rank's TCPStore connects, plain TCP connections to rank 0's store until one is accepted. The
    TCPStore client says only "timed out", and retrying a refused connection it overran its own timeout by seconds
    on a loaded node (dfdoctor then killed the rank as hung); each try here says why it failed: *refused* (the node
    answers and nothing listens there yet: rank 0 is late, or never came), *no answer* (the packets are dropped on
    the way: a firewall), *no route*. STATE['reach'] keeps the tally; out of time, the tally is the error."""
    t0 = time.monotonic()
    end = t0 + left()
    outcomes: List[str] = []
    said = ""
    while time.monotonic() < end:
        wait = min(TRY_S, end - time.monotonic())
        try:
            with socket.create_connection((addr, port), timeout=max(0.1, wait)):
                return
        except socket.timeout:
            outcomes.append("no answer" if wait >= 1.0 else "cut short")
        except ConnectionRefusedError:
            outcomes.append("refused")
        except OSError as exc:
            outcomes.append("no route" if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES,
                                                        errno.EPERM) else "other")
            said = f"{exc.strerror or exc} (errno {exc.errno})"
        seconds = time.monotonic() - t0
        STATE["reach"] = {"addr": addr, "port": port, "tries": len(outcomes), "seconds": round(seconds, 1),
                          "outcomes": {k: outcomes.count(k) for k in sorted(set(outcomes))}, "said": said}
        if outcomes[-1] != "no answer":
            time.sleep(0.2)
    kinds = set(outcomes) - {"cut short"}
    head = f" on {NODE_NAMES[0]}" if NODE_NAMES else ""
    where = f"rank 0's store at {addr}:{port}{head}"
    if kinds and kinds <= {"no answer", "no route"}:
        STATE["unreachable"] = {**STATE["reach"], "node": NODE_NAMES[0] if NODE_NAMES else None}
        silent, refused = outcomes.count("no answer"), outcomes.count("no route")
        how = (f"{silent} TCP connection attempt(s) got no answer in {TRY_S:.0f} s each (the packets are dropped on "
               f"the way: a firewall, a security group)" if not refused else
               f"{refused} TCP connection attempt(s) failed: {said}" + (
                   f", {silent} got no answer in {TRY_S:.0f} s (a firewall that rejects rate-limits its answers)"
                   if silent else ""))
        raise Unreachable(f"this node cannot reach {where} (a network reachability fact, observed): {how}")
    STATE["waited_for"] = [0]
    if kinds == {"refused"}:
        raise OtherRanks(f"{where} refused every connection for {time.monotonic() - t0:.0f} s ({len(outcomes)} "
                         f"tries): the node answers, but nothing listened there")
    tally = ", ".join(f"{k} {v}" for k, v in STATE.get("reach", {}).get("outcomes", {}).items())
    raise OtherRanks(f"could not connect to {where} in {time.monotonic() - t0:.0f} s ({tally or 'no try'})")


def stage(name: str) -> None:
    """Enter a stage and publish it."""
    STATE["stage"] = name
    STATE["stages"].append([name, round(time.monotonic() - T0, 3)])
    support.answer(STATE)


def left(reserve: float = 2.0) -> float:
    """Seconds of the budget left, less a reserve so this rank can still report its own timeout."""
    return max(1.0, BUDGET - (time.monotonic() - T0) - reserve)


def list_gpus() -> dict:
    """The GPUs the kernel driver knows (from /proc, else /dev/nvidiaN), CUDA_VISIBLE_DEVICES and the torch build
    read from its files; no torch imported."""
    gpus = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        uuid = None
        try:
            with open(info) as f:
                for line in f:
                    if line.startswith("GPU UUID:"):
                        uuid = line.split(":", 1)[1].strip()
        except OSError:
            continue
        gpus.append({"index": len(gpus), "uuid": uuid})
    if not gpus:
        nodes = [p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p)]
        gpus = [{"index": i, "uuid": None} for i in range(len(nodes))]
    return {"gpus": gpus, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "torch_build": torch_build()}


def torch_build():
    """The torch build this interpreter would import, as its torch/version.py says (None when that cannot be read
    for certain: then the ranks' own import of torch tells). Imported here only: a rank needs none of it."""
    import _torch_build
    return _torch_build.read()


def ready_gpu(torch):
    """Bind this rank to its GPU and touch it (or the CPU for gloo); fault injection happens here too."""
    if USES_NCCL:
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
        while True:  # DFDOCTOR_NCCL_HANG_RANK asked for this; dfdoctor kills the rank at the deadline
            time.sleep(3600)
    return device


def failures(store, others: List[int]) -> Tuple[List[int], str]:
    """The ranks among `others` that wrote *failed* into the store, and what each said."""
    failed = [r for r in others if store.check([f"dfdoctor/failed/{r}"])]
    return failed, "; ".join(f"rank {r}: {store.get(f'dfdoctor/failed/{r}').decode()}" for r in failed)


def census(store) -> None:
    """Over several nodes, every node must start as many ranks as the others: each node's dfdoctor numbers its
    ranks from its own count (node i runs ranks i*n ..), so a node that counts otherwise (one GPU fewer visible)
    would give two processes one rank. Each rank says its node's count; all compare them, and a disagreement is
    every rank's error, naming each node's count."""
    if len(NODE_NAMES) < 2:
        return
    stage("census")
    store.set(f"dfdoctor/census/{NODE}", str(LOCAL_WORLD))
    keys = [f"dfdoctor/census/{i}" for i in range(len(NODE_NAMES))]
    end = time.monotonic() + left()
    while not all(store.check([k]) for k in keys):
        if time.monotonic() > end:
            missing = [i for i, k in enumerate(keys) if not store.check([k])]
            STATE["waited_for"] = [i * LOCAL_WORLD + r for i in missing for r in range(LOCAL_WORLD)]
            STATE["never_joined"] = [NODE_NAMES[i] for i in missing]
            raise OtherRanks(f"node(s) {', '.join(NODE_NAMES[i] for i in missing)} never joined rank 0's store at "
                             f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
        time.sleep(0.05)
    counts = [int(store.get(k).decode()) for k in keys]
    if len(set(counts)) > 1:
        said = ", ".join(f"{name} {n}" for name, n in zip(NODE_NAMES, counts))
        raise RuntimeError(f"the nodes start different numbers of ranks ({said}): each node's count must be the "
                           f"same (its visible GPUs, --nproc_per_node or world_size)")


def wait_for_ranks(store) -> None:
    """Wait until every rank is ready; give up at once if one failed, or when the budget runs out."""
    stage("waiting for the other ranks")
    others = [r for r in range(WORLD) if r != RANK]
    end = time.monotonic() + left()
    while True:
        failed, why = failures(store, others)
        if failed:
            STATE["waited_for"] = failed
            raise OtherRanks(f"stopped waiting: {why}")
        missing = [r for r in others if not store.check([f"dfdoctor/ready/{r}"])]
        if not missing:
            return
        if time.monotonic() > end:
            STATE["waited_for"] = missing
            raise OtherRanks(f"rank(s) {', '.join(map(str, missing))} never got ready")
        time.sleep(0.05)


def watch_for_failures(dist, datetime) -> None:
    """While this rank waits inside torch (init_process_group, the collectives: C++ waits that nothing can
    interrupt), a second connection to the store watches for another rank's failure. On one, this rank says it
    stopped waiting, and for whom, and exits at once: a rank on another node that could not join costs the rest
    a tenth of a second, not the group's whole timeout."""
    others = [r for r in range(WORLD) if r != RANK]

    def run() -> None:
        try:
            watcher = dist.TCPStore(os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]),
                                    WORLD, is_master=False, timeout=datetime.timedelta(seconds=10),
                                    wait_for_workers=False)
        except Exception:
            return  # the store is gone: the main thread meets that itself
        while STATE["stage"] not in ("destroy_process_group", "done"):
            try:
                failed, why = failures(watcher, others)
            except Exception:
                return
            if failed:
                STATE.update(waited_for=failed, failed_stage=STATE["stage"],
                             error=f"OtherRanks: stopped waiting: {why}"[:1000])
                leave(watcher)
                stage("done")
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            time.sleep(0.1)

    threading.Thread(target=run, name="dfdoctor-watch", daemon=True).start()


def main() -> int:
    """Join the store, ready the GPU, wait for all, init the group, all-reduce, barrier; publish each step."""
    support.install_stack_dump()
    if "--list-gpus" in sys.argv:
        support.answer(list_gpus())
        return 0
    store = None
    try:
        stage("import torch")
        import datetime

        import torch
        import torch.distributed as dist
        STATE["torch"] = torch.__version__
        stage("rendezvous")
        addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"])
        joined = threading.Event()
        if RANK != 0:
            stop_if_rank0_has_no_store(addr, port, joined)
            reach_store(addr, port)
        store = dist.TCPStore(addr, port, WORLD, is_master=RANK == 0, timeout=datetime.timedelta(seconds=left()),
                              wait_for_workers=False)
        joined.set()
        census(store)
        device = ready_gpu(torch)  # a failure is written into the store below, for the others to read
        store.set(f"dfdoctor/ready/{RANK}", "1")
        wait_for_ranks(store)
        stage("init_process_group")
        watch_for_failures(dist, datetime)
        kwargs = dict(backend=BACKEND, store=dist.PrefixStore("pg", store), rank=RANK, world_size=WORLD,
                      timeout=datetime.timedelta(seconds=left()))
        if USES_NCCL:
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
        if USES_NCCL:
            torch.cuda.synchronize(device)
        expected = WORLD * (WORLD + 1) / 2
        STATE["all_reduce"] = {"expected": expected, "min": float(x.min().item()), "max": float(x.max().item()),
                               "seconds": round(time.monotonic() - t, 4)}
        STATE["correct"] = STATE["all_reduce"]["min"] == expected == STATE["all_reduce"]["max"]
        stage("barrier")
        if USES_NCCL:
            dist.barrier(device_ids=[LOCAL_RANK])
        else:
            dist.barrier()
        stage("destroy_process_group")
        dist.destroy_process_group()
    except BaseException as exc:
        STATE["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:1000]
        STATE["traceback"] = traceback.format_exc()[-3000:]
        STATE["failed_stage"] = STATE["stage"]
        if store is None and RANK == 0 and STATE["stage"] == "rendezvous":
            say_no_store(STATE["error"])
        if store is not None and not isinstance(exc, OtherRanks):
            try:  # the others may be waiting inside torch for this rank: their watchers read this
                store.set(f"dfdoctor/failed/{RANK}", f"{type(exc).__name__}: {exc}"[:300])
            except Exception:
                pass
    if store is not None:
        leave(store)
    stage("done")
    return 0


def leave(store) -> None:
    """Say this rank is done, whatever its outcome; rank 0, whose process holds the store, first waits (a few
    seconds at most) until every other rank is done too, so none loses the store while it still reads why, not
    even one still importing torch (so a rank that will never come costs those few seconds)."""
    try:
        store.set(f"dfdoctor/done/{RANK}", "1")
    except Exception:
        return  # rank 0 already left
    if RANK == 0:
        end = time.monotonic() + min(5.0, BUDGET - (time.monotonic() - T0) - 1.0)  # never into the deadline
        while time.monotonic() < end:
            try:
                if all(store.check([f"dfdoctor/done/{r}"]) for r in range(1, WORLD)):
                    return
            except Exception:
                return
            time.sleep(0.02)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: NCCL's destructors can hang after a failed collective
