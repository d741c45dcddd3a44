"""A Ray driver that starts a detached actor (as Ray Train's autoscaling coordinator is), then prints steps: once
the job is stopped, its detached actor lives on (Ray's stop ends the driver, never a detached actor)."""
import time

import ray

ray.init()


@ray.remote(num_cpus=0)
class Cache:
    def ready(self):
        return True


cache = Cache.options(name="dfdoctor_test_cache", namespace="dfdoctor_test", lifetime="detached").remote()
ray.get(cache.ready.remote())
for i in range(600):
    print(f"step {i} with the cache up", flush=True)
    time.sleep(0.5)
