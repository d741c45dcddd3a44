"""Works and prints, but stdout is a pipe and Python block-buffers it: `output-buffered` (without -u). With
`quiet` it works a minute before its first print, as a job loading its model does."""
import sys
import time

if sys.argv[1:] == ["quiet"]:
    time.sleep(60)
for step in range(10**6):
    print(f"step {step} loss {1.0 / (step + 1):.4f}")
    time.sleep(0.05)
