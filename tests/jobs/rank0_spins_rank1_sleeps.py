"""torchrun, no process group: rank 1 sleeps, rank 0 spins in C (a regular expression that backtracks without end,
as a rank spins in a CUDA synchronise or an NCCL collective on a GPU): nothing of the job moves, yet CPU burns and
torchrun's agent wakes to poll them.

Rank 0 sleeps through its first 4 s of silence before it spins: no look at a silent job comes before 5 s of
silence (doctor/watch/rhythm.py's GRACE_S), so every look sees it spin, and a core is not burned for the seconds
no look sees."""
import os
import re
import time

print(f"rank {os.environ.get('RANK')} up", flush=True)
if os.environ.get("RANK") == "1":
    time.sleep(600)
time.sleep(4.0)
re.match(r"(a*)*b", "a" * 64)
