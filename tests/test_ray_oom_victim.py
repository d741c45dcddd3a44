"""Whom Ray's memory monitor killed, read from the message Ray gives the driver (no cluster needed: the words are
Ray's own, as its raylet writes them; tests/test_ray.py makes a real kill)."""

from dfdoctor.ray import rules

NODE = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 10.0.0.5, ID: 5e1f) where the lease was running was 3.96GB / 23.59GB (0.167875), "
        "which exceeds the memory usage threshold of 0.167. Ray killed this worker (ID: 3e3d) because it was the "
        "most recently scheduled task.\n")


def _selected(name: str, used: str) -> str:
    return (f"Selected to kill: (Actor(JobSupervisor, 4c0a): job ID=02000000, lease ID=0600000001000000ffff, "
            f"task name={name}, required resources={{}}, pid=3310152, actual memory used={used}, worker ID=3e3d)\n")


def _summary(message: str) -> str:
    seen = rules.Seen(job_id="raysubmit_1", address="http://127.0.0.1:8265",
                      job={"status": "FAILED", "message": message})
    v = rules.actor_oom(seen)
    assert v is not None and v.cause == "ray-actor-oom", v
    return v.summary


def test_a_kill_of_the_jobs_supervisor_is_said_as_such_never_an_unnamed_worker():
    """Where the node fills from outside the job (another program on it), the monitor may take Ray's own actor
    that runs the driver before any task of the job holds much: a user reading "a worker of the job" looks for a
    task of theirs that hogged memory, and there is none."""
    said = _summary(NODE + _selected("_ray_internal_job_actor_raysubmit_1", "0.09GB"))
    assert said.startswith("Ray's memory monitor killed the job's supervisor (_ray_internal_job_actor_raysubmit_1, "
                           "Ray's own actor that runs the driver): it held 0.09GB"), said


def test_the_jobs_own_task_is_named_before_rays_supervisor():
    said = _summary(NODE + _selected("_ray_internal_job_actor_raysubmit_1", "0.09GB")
                    + _selected("hog", "2.50GB").replace("Actor(JobSupervisor, 4c0a)", "Task"))
    assert said.startswith("Ray's memory monitor killed hog: it held 2.50GB"), said
