"""A Ray driver whose task allocates memory, 128 MiB at a time, until Ray's memory monitor kills it (the head runs
with a memory threshold a little above what the machine used when it started) or it holds CAP MiB (argv[1]):
the memory is touched, so it is really used. It stops short while the machine has less than 3 GiB available
(the machine is shared), and prints nothing while it allocates (no output that grows: the job is not running).
No retry (`max_retries=0`): Ray's first kill is the task's end."""
import sys
import time

import ray

CAP_MIB = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
FLOOR = 3 << 30
ray.init()


def available():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))


@ray.remote(max_retries=0)
def hog(cap_mib):
    held = []
    while len(held) * 128 < cap_mib and available() > FLOOR:
        # written once, in place (a 1-byte bytearray repeated is one memset): bytearray(b"x" * n) wrote a bytes
        # of n first and then its copy, twice the page faults (3.7 CPU-s against 1.5 for 2.5 GiB here)
        held.append(bytearray(b"x") * (128 << 20))
        time.sleep(0.1)
    time.sleep(60)  # not killed: hold it a while, then give it back
    return len(held)


print(ray.get(hog.remote(CAP_MIB)))
