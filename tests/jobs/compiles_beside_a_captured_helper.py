"""A silent compile that keeps a helper's output in a temp file, as torch inductor's autotuning does with its
worker processes (their stderr goes to tempfile.NamedTemporaryFile(suffix=".log"), the parent holds it open):
busy for 60 s without a line, its helper asleep, then a step every 0.1 s."""
import subprocess
import sys
import tempfile
import time

captured = tempfile.NamedTemporaryFile(suffix=".log")
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stderr=captured)
end = time.time() + 60
while time.time() < end:
    sum(i * i for i in range(10000))
for step in range(100000):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
