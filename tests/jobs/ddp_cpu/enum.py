"""The backend as torch's enum."""
import torch
import torch.distributed as dist
from torch.distributed import Backend

dist.init_process_group(Backend.GLOO)
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: all-reduced {t.item():g}", flush=True)
dist.destroy_process_group()
