"""Holds GPU memory (GiB given as argument) until killed: the other process an OOM verdict must name."""
import sys
import time

import torch

block = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
print("holding", flush=True)
time.sleep(600)
