"""Prints every 0.1 s, then evaluates for a long while without printing (pure CPU work), then prints again:
a healthy slow phase, `running` (its CPU time grows, its stack moves)."""
import time

for step in range(30):
    print(f"step {step}: loss {1.0 / (step + 1):.4f}", flush=True)
    time.sleep(0.1)
deadline = time.monotonic() + 600
total = 0
while time.monotonic() < deadline:  # "evaluation": busy, silent
    total += sum(i * i for i in range(10000))
print("eval done", total, flush=True)
