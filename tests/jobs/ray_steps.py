"""A Ray driver that runs: a line per step, each from a task."""
import time

import ray

ray.init()


@ray.remote
def step(i):
    return i * i


for i in range(600):
    print(f"step {i} loss {ray.get(step.remote(i))}", flush=True)
    time.sleep(0.5)
