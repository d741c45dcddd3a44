"""Trains (logs steps for a while), then saves a checkpoint into the folder given as its argument with
torch.save, or (with `--json` as well) writes it as plain JSON. On a small, full file system the save fails
(`disk-full`): torch.save's writer says only "unexpected pos", json.dump says [Errno 28]."""
import json
import os
import sys
import time

out = sys.argv[1]
print(f"saving checkpoints to {out}", flush=True)
for step in range(20):
    print(f"step {step} loss {1 / (step + 1):.4f}", flush=True)
    time.sleep(0.05)
state = {"step": 20, "weights": [0.5] * 400_000}
path = os.path.join(out, "ckpt_step20.pt")
if "--json" in sys.argv:
    with open(path, "w") as f:
        json.dump(state, f)
else:
    import torch

    torch.save({"step": 20, "weights": torch.zeros(400_000)}, path)
print("saved", flush=True)
