"""Logs, then is killed by SIGKILL from outside the memory system: `killed-by-signal`."""
import os
import signal
import time

print("step 0", flush=True)
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGKILL)
