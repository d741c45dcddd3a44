"""A torchrun job (gloo, CPU) with a 3 s collective timeout: rank 1 is late for the all_reduce, so rank 0's
gloo recv times out (the text NCCL's watchdog prints in the same situation differs; both are
collective-timeout)."""
import datetime
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    rank = dist.get_rank()
    print(f"rank {rank}: joined", flush=True)
    if rank == 1:
        time.sleep(20)  # evaluation on one rank only, say
    dist.all_reduce(torch.ones(2))


if __name__ == "__main__":
    main()
