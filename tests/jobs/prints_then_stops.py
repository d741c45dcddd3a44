"""Prints every 0.1 s, then takes a lock its own thread already holds: dead stop (issue 41)."""
import threading
import time

lock = threading.Lock()
for step in range(30):
    print(f"step {step}/30: loss {1.0 / (step + 1):.4f}", flush=True)
    time.sleep(0.1)
lock.acquire()
lock.acquire()  # never returns
