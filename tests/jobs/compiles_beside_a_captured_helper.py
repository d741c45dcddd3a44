"""A silent compile that keeps a helper's output in a temp file, as torch inductor's autotuning does with its
worker processes (their stderr goes to tempfile.NamedTemporaryFile(suffix=".log"), the parent holds it open):
busy for 60 s without a line, its helper asleep, then a step every 0.1 s.

Its first 3 s it waits (as a compile waits for its workers to start): no look at a job silent since its start
comes before 5 s (doctor/watch/rhythm.py's GRACE_S), so every look sees it busy, and a core is not burned for the
seconds no look sees."""
import subprocess
import sys
import tempfile
import time

captured = tempfile.NamedTemporaryFile(suffix=".log")
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stderr=captured)
time.sleep(3.0)
end = time.time() + 60
while time.time() < end:
    sum(i * i for i in range(10000))
for step in range(100000):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
