"""A torchrun job (gloo, CPU) whose rank 1 is killed with SIGKILL after joining (as the OOM killer or a user's
kill -9 would): the verdict names rank 1 and the signal."""
import os
import signal

import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"rank {rank}: joined", flush=True)
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()


if __name__ == "__main__":
    main()
