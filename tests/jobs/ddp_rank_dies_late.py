"""torchrun: both ranks log steadily; rank 1 dies a few seconds in (a GPU it does not have, a file it cannot
find). torchrun then stops rank 0 too. A launch must never have called this running. (No process group: what
is proved is torchrun's ranks logging then one dying, and each rank's import of torch for one cost ~1.2 CPU-s.)"""
import os
import sys
import time

rank = int(os.environ["RANK"])
for step in range(200):
    print(f"rank {rank} step {step}", flush=True)
    time.sleep(0.2)
    if rank == 1 and step == 15:
        sys.exit("rank 1: no such device")
