"""torchrun (gloo, CPU): both ranks train three steps, then rank 1 skips an all_reduce that rank 0 waits in:
`collective-hang`, naming rank 1 and where it is instead."""
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
for step in range(3):
    dist.all_reduce(torch.ones(2))
    print(f"rank {rank} step {step}", flush=True)
if rank == 1:
    time.sleep(600)  # rank 1 skips the next all_reduce
dist.all_reduce(torch.ones(2))
