"""Logs one line every N seconds (argv[1], default 60) and sleeps between: a healthy slow logger."""
import sys
import time

every = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
step = 0
while True:
    print(f"step {step}: loss {1.0 / (step + 1):.4f}", flush=True)
    step += 1
    time.sleep(every)
