"""A plain DDP script as users write it: each rank binds GPU LOCAL_RANK and joins an NCCL group. Started with
more ranks than GPUs (torchrun --nproc_per_node 2 on one GPU), rank 1 fails with "invalid device ordinal"."""
import os

import torch
import torch.distributed as dist


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    print(f"rank {dist.get_rank()} on cuda:{local_rank}", flush=True)
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
