"""The backend from an argparse option whose default is NCCL: run with --dist-backend gloo on CPUs."""
import argparse

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--dist-backend", default="nccl", type=str)
args = parser.parse_args()
dist.init_process_group(backend=args.dist_backend)
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: all-reduced {t.item():g}", flush=True)
dist.destroy_process_group()
