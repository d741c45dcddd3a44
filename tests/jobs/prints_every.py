"""A healthy, slow job: one line every N seconds (default 4)."""
import sys
import time

every = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
for step in range(1000):
    print(f"step {step}", flush=True)
    time.sleep(every)
