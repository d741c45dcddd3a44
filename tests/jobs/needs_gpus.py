"""A tensor-parallel example's guard, as public examples write it: every rank checks for the GPUs it needs and,
finding too few, prints why and exits 0 (`sys.exit()`). Under torchrun on a CPU machine every rank "succeeds"
having done nothing: `did-nothing`, with the line it printed. With `stderr`, the reason goes through logging."""
import logging
import os
import sys

import torch

MIN_GPUS = 4

if torch.cuda.device_count() < MIN_GPUS:
    why = f"Unable to locate sufficient {MIN_GPUS} gpus to run this example. Exiting."
    logging.error(why) if sys.argv[1:] == ["stderr"] else print(why)
    sys.exit()

rank = int(os.environ.get("RANK", "0"))
for step in range(100):
    print(f"rank {rank} step {step}", flush=True)
