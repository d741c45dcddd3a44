"""torchrun (gloo, CPU): both ranks log steadily; rank 1 dies a few seconds in (a GPU it does not have, a file
it cannot find). torchrun then stops rank 0 too. A launch must never have called this running."""
import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
for step in range(200):
    print(f"rank {rank} step {step}", flush=True)
    time.sleep(0.2)
    if rank == 1 and step == 15:
        sys.exit("rank 1: no such device")
