"""A Ray driver whose actor holds both CPUs of the cluster while its next task asks for one: the task waits."""
import time

import ray

ray.init()


@ray.remote(num_cpus=2)
class ParameterServer:
    def ready(self):
        return True


@ray.remote(num_cpus=1)
def worker_step():
    return 1


ps = ParameterServer.remote()
ray.get(ps.ready.remote())
print("parameter server up; starting a worker step", flush=True)
print(ray.get(worker_step.remote()))
time.sleep(600)
