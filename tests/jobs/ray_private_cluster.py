"""A Ray driver that starts a private local Ray instance (`address="local"`) instead of joining the cluster its
job was submitted to (where RAY_ADDRESS points): its tasks run beside the head, on nothing of the cluster. Its
temp dir is its own (never /tmp/ray, which other Ray users of the machine share), removed when it ends."""
import os
import shutil
import signal
import sys
import tempfile
import time

import ray

signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stop still removes the temp dir (finally)
# short: Ray's socket paths live under it
temp = os.environ.get("DFDOCTOR_TEST_RAY_TMP") or tempfile.mkdtemp(prefix="dfrw", dir="/tmp")
try:
    ray.init(address="local", num_cpus=1, include_dashboard=False, _temp_dir=temp)

    @ray.remote
    def step(i):
        return i * i

    for i in range(600):
        print(f"step {i} loss {ray.get(step.remote(i))}", flush=True)
        time.sleep(0.5)
finally:
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
