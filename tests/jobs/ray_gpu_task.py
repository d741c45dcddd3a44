"""A Ray driver whose task asks for a GPU on a cluster without one: Ray never places it, the job says RUNNING."""
import ray

ray.init()


@ray.remote(num_gpus=1)
def train_step():
    return 1


print("submitting a task that needs a GPU", flush=True)
print(ray.get(train_step.remote()))
