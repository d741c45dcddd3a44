"""torchrun, no process group: rank 1 sleeps, rank 0 spins in C (a regular expression that backtracks without end,
as a rank spins in a CUDA synchronise or an NCCL collective on a GPU): nothing of the job moves, yet CPU burns and
torchrun's agent wakes to poll them."""
import os
import re
import time

print(f"rank {os.environ.get('RANK')} up", flush=True)
if os.environ.get("RANK") == "1":
    time.sleep(600)
re.match(r"(a*)*b", "a" * 64)
