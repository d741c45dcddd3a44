"""A tensor-parallel example's guard, as public examples write it: every rank checks for the GPUs it needs and,
finding too few, prints why and exits 0 (`sys.exit()`). Under torchrun on a CPU machine every rank "succeeds"
having done nothing: `did-nothing`, with the line it printed. With `stderr`, the reason goes through logging.

With `together`, the ranks meet (gloo, no file written) and then print as an unbuffered `print` does (python -u,
PYTHONUNBUFFERED=1): the text, then the newline, in two writes. Ranks that print at the same moment leave
"whywhy" and then the newlines; here the meeting between the two writes makes that moment certain."""
import logging
import os
import sys

import torch

MIN_GPUS = 4

if torch.cuda.device_count() < MIN_GPUS:
    why = f"Unable to locate sufficient {MIN_GPUS} gpus to run this example. Exiting."
    if sys.argv[1:] == ["together"]:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        os.write(1, why.encode())
        dist.barrier()
        os.write(1, b"\n")
        dist.destroy_process_group()
    else:
        logging.error(why) if sys.argv[1:] == ["stderr"] else print(why)
    sys.exit()

rank = int(os.environ.get("RANK", "0"))
for step in range(100):
    print(f"rank {rank} step {step}", flush=True)
