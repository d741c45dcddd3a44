"""Logs two steps, then raises: `crashed`."""
import time

print("step 0 loss 1.0", flush=True)
time.sleep(0.3)
print("step 1 loss nan", flush=True)
raise FloatingPointError("loss became nan at step 1")
