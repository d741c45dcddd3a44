"""Prints every 0.1 s, then evaluates for a long while without printing (pure CPU work), then prints again:
a healthy slow phase, `running` (its CPU time grows, its stack moves).

Its first 4 s of silence it spends asleep (an evaluation loading its data): no look at a silent job comes before
5 s of silence (doctor/watch/rhythm.py's GRACE_S, this job's rhythm of 0.1 s being shorter), so every look sees it
compute, and a core is not burned for the seconds no look sees (the launch and `status` look from the 5th s on)."""
import time

for step in range(30):
    print(f"step {step}: loss {1.0 / (step + 1):.4f}", flush=True)
    time.sleep(0.1)
time.sleep(4.0)
deadline = time.monotonic() + 600
total = 0
while time.monotonic() < deadline:  # "evaluation": busy, silent
    total += sum(i * i for i in range(10000))
print("eval done", total, flush=True)
