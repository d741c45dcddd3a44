"""A launcher whose work passes through many short-lived processes before it settles in a daemon: each generation
forks the next and exits at once, for about a second, every one of them holding the launcher's stdout and
stderr. Whoever lists /proc while this runs sees processes that are gone before their fds can be read, and misses
the ones born after. The last one logs a line every 0.2 s until the file STOP exists.
Usage: handoff_relay.py STOP"""
import os
import sys
import time

stop = sys.argv[1]
if os.fork() > 0:
    print("launcher: handing off", flush=True)
    sys.exit(0)
os.setsid()
end = time.time() + 1.0
while time.time() < end:
    if os.fork() > 0:
        os._exit(0)
step = 0
while not os.path.exists(stop) and step < 600:
    print(f"daemon step {step}", flush=True)
    step += 1
    time.sleep(0.2)
print(f"daemon finished after {step} steps", flush=True)
