"""A Ray driver whose task allocates memory, 128 MiB at a time, until Ray's memory monitor kills it (the head runs
with a memory threshold a little above what the machine used when it started) or it holds CAP MiB (argv[1]):
the memory is touched, so it is really used. No retry (`max_retries=0`): Ray's first kill is the task's end."""
import sys
import time

import ray

CAP_MIB = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
ray.init()


@ray.remote(max_retries=0)
def hog(cap_mib):
    held = []
    while len(held) * 128 < cap_mib:
        held.append(bytearray(b"x" * (128 << 20)))
        print(f"holding {len(held) * 128} MiB", flush=True)
        time.sleep(0.2)
    time.sleep(60)  # the cap reached and not killed: hold it a while, then give it back
    return len(held)


print(ray.get(hog.remote(CAP_MIB)))
