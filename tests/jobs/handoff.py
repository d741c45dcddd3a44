"""A launcher that hands its work to a daemon and exits 0 at once: the daemon (double-forked, its own session)
keeps the launcher's stdout and stderr and logs a line every 0.2 s for SECONDS, or until the file STOP exists,
then says it finished and exits with STATUS (a non-zero status raises first, so there is a traceback).
Usage: handoff.py SECONDS [STATUS [STOP]]"""
import os
import sys
import time

seconds = float(sys.argv[1])
status = int(sys.argv[2]) if len(sys.argv) > 2 else 0
stop = sys.argv[3] if len(sys.argv) > 3 else None
if os.fork() > 0:
    print("launcher: handing off to the trainer daemon", flush=True)
    sys.exit(0)
os.setsid()
if os.fork() > 0:
    os._exit(0)
end = time.time() + seconds
step = 0
while time.time() < end and not (stop and os.path.exists(stop)):
    print(f"daemon step {step}", flush=True)
    step += 1
    time.sleep(0.2)
print(f"daemon finished after {step} steps", flush=True)
if status:
    raise RuntimeError(f"the daemon gave up with status {status}")
