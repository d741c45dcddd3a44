"""torchrun (gloo, lazy init, CPU): rank 1 is held up before init_process_group; rank 0's init_process_group
returns without it (TORCH_GLOO_LAZY_INIT=1 connects to peers only at the first collective, as NCCL does) and
rank 0 exits 0, leaving rank 1 asleep at its line: `rank-missing`."""
import os
import time

if os.environ.get("RANK") == "1":
    time.sleep(600)  # rank 1 never arrives
import torch.distributed as dist

dist.init_process_group("gloo")
print("rank", dist.get_rank(), "joined, leaving without a collective", flush=True)
