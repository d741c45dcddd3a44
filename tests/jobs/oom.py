"""Logs, then allocates memory in 32 MiB steps until the kernel's OOM killer ends it: `oom-killed`."""
import time

print("loading data", flush=True)
chunks = []
while True:
    chunks.append(bytearray(32 << 20))  # zero-filled, so the pages are really touched
    time.sleep(0.02)
