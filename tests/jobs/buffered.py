"""Works and prints, but stdout is a pipe and Python block-buffers it: `output-buffered` (without -u)."""
import time

for step in range(10**6):
    print(f"step {step} loss {1.0 / (step + 1):.4f}")
    time.sleep(0.05)
