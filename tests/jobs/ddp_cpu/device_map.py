"""A backend per device: NCCL for CUDA tensors, gloo for CPU ones. A CPU-only torch has no NCCL, so this fails."""
import torch
import torch.distributed as dist

dist.init_process_group("cuda:nccl,cpu:gloo")
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: all-reduced {t.item():g}", flush=True)
dist.destroy_process_group()
