"""A supervisor starts worker processes and sleeps, never reaping them; each worker dies of an exception with a
traceback on stderr and stays a zombie (issue 41): the job is failed, with the workers' own traceback."""
import os
import sys
import time


def work(n):
    print(f"worker {n}: loading shard", flush=True)
    shard = {"a": 1}
    return shard["shard-%d" % n]


print("supervisor: starting 2 workers", flush=True)
for n in range(2):
    if os.fork() == 0:
        try:
            work(n)
        except BaseException:
            import traceback
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
while True:
    time.sleep(1)
