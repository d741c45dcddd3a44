"""The group is started by a framework's strategy, not by this script (Trainer(accelerator="cpu", strategy="ddp"))."""
import torch
import torch.distributed as dist

from _strategy import setup_environment

setup_environment("cpu")
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: all-reduced {t.item():g}", flush=True)
dist.destroy_process_group()
