"""A torchrun job (gloo, CPU): every rank joins, then rank 1 raises its own error and rank 0 waits in a barrier.
Under torchrun the verdict is rank 1's ValueError, not the agent's ChildFailedError. With `record` as its first
argument the entry point is decorated with @record, so torchrun keeps the rank's error file. With `early`,
rank 1 fails before init_process_group, as torch.cuda.set_device(LOCAL_RANK) does with fewer GPUs than ranks;
torch.distributed then prints its traceback without the `[rank1]:` prefix. With `abort`, rank 1 raises and then
dies with SIGABRT while exiting, as a process group torn down at interpreter exit sometimes does. With `casualty`,
rank 1 raises, closes its process group and lingers: rank 0's barrier fails with gloo's "Connection closed by peer"
and torchrun sees rank 0 end first, as CI once saw on a loaded machine."""
import atexit
import os
import sys
import time

if sys.argv[1:] == ["early"] and os.environ.get("LOCAL_RANK") == "1":
    # before its import of torch too: its failure is the same words, and rank 0's wait for it the same (an import
    # of torch that proved nothing here, ~1.3 CPU-s)
    raise RuntimeError("CUDA error: invalid device ordinal")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"rank {rank}: joined, world size {dist.get_world_size()}", flush=True)
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        if sys.argv[1:] == ["abort"]:
            atexit.register(os.abort)
        if sys.argv[1:] == ["casualty"]:
            atexit.register(time.sleep, 4)  # registered first, so it runs after the process group is closed
            atexit.register(dist.destroy_process_group)
        raise ValueError("shard 7 is missing on rank 1")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    (record(main) if sys.argv[1:] == ["record"] else main)()
