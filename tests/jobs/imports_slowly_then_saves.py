"""Imports a module that takes seconds (slowimport.py, as `import torch` under load), then works for argv[1]
seconds printing into its block buffer (no -u), then saves into a folder that does not exist, as the public
corpus's word_language_model does with `--save checkpoints/model.pt`: `output-dir-missing`, not `output-buffered`."""
import sys
import time

import slowimport  # noqa: F401

end = time.monotonic() + float(sys.argv[1])
step = 0
while time.monotonic() < end:  # wall time, not work: the job reaches its save on time however loaded the machine
    print(f"step {step} loss {1.0 / (step + 1):.4f}")
    step += 1
    time.sleep(0.05)
with open("checkpoints/model.pt", "wb") as f:
    f.write(b"weights")
