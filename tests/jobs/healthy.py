"""A healthy job: logs a line every 0.2 s (unbuffered) for the number of seconds given (default 60)."""
import sys
import time

end = time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 60)
step = 0
while time.time() < end:
    print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    step += 1
    time.sleep(0.2)
