"""Silent for its first 2 s (as a job importing torch and bringing CUDA up is), then a line every 0.2 s for a minute."""
import time

time.sleep(2)
for step in range(300):
    print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    time.sleep(0.2)
