"""The backend chosen by what the machine has, as many examples do."""
import torch
import torch.distributed as dist

backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: all-reduced {t.item():g}", flush=True)
dist.destroy_process_group()
