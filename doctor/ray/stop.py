"""`dfdoctor stop` for a Ray job: Ray's own stop endpoint (POST /api/jobs/ID/stop), then the job API's word that
the job reached a final state. Never `ray stop`, which ends every Ray process of the machine, the cluster's too.

A job PENDING because its entrypoint asks for what no node has cannot be stopped this way: Ray's job manager
keeps waiting for its supervisor actor (RAY-FACTS.md), and no HTTP API ends an actor. That is said, with how."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from dfdoctor.placing import Ended
from dfdoctor.ray.api import Api, ApiError
from dfdoctor.ray.submit import DEFAULT_ADDRESS, http_address, token

POLL_S = 0.5
FINAL = ("STOPPED", "SUCCEEDED", "FAILED")
RAY_STOP_S = 10.0  # Ray's stop: SIGTERM to the entrypoint, SIGKILL after its own grace (3 s by default)


@dataclass
class RayStopped(Ended):
    """What the stop endpoint did to one Ray job, and the job API's status afterwards."""

    address: str = DEFAULT_ADDRESS
    asked: bool = False  # the stop endpoint was posted to (what it did not do is then `said`)

    @property
    def was_running(self) -> bool:
        return self.state_before in ("PENDING", "RUNNING")

    def lines(self) -> list[str]:
        if self.said and self.asked:  # the NOT stopped line says why
            return [f"asked Ray to stop job {self.job_id} (it was {self.state_before}) through its stop endpoint"]
        if self.said:
            return [f"Ray did not stop job {self.job_id}: {self.said}"]
        if not self.was_running:
            return [f"Ray job {self.job_id} was already {self.state_before}: nothing to stop"]
        return [f"stopped Ray job {self.job_id} through its stop endpoint (it was {self.state_before}); Ray now "
                f"says {self.state_after or 'nothing'}"]

    def left_words(self) -> str:
        return f"Ray job {self.job_id} ({', '.join(self.left)})"

    def note(self) -> dict[str, Any]:
        return {"ray": {"job_id": self.job_id, "before": self.state_before, "after": self.state_after,
                        "left": self.left}}


def api_for(address: str, env: Mapping[str, str]) -> Api:
    return Api(http_address(address), token(env))


def stop(job_id: str, grace_s: float, address: str, env: Mapping[str, str]) -> RayStopped:
    """Ask Ray to stop the job, and wait (its grace plus Ray's own) until the job API says it ended."""
    api = api_for(address, env)
    out = RayStopped(job_id, "", address=address)
    try:
        out.state_before = str(api.job(job_id).get("status") or "")
    except ApiError as exc:
        out.said = f"Ray at {address} does not know job {job_id}: {exc.said}" if exc.status == 404 else \
            f"Ray at {address} did not answer: {exc.said}"
        return out
    if not out.was_running:
        out.state_after = out.state_before
        return out
    try:
        api.post(f"/api/jobs/{job_id}/stop")
    except ApiError as exc:
        out.said = exc.said
        return out
    out.asked = True
    deadline = time.monotonic() + grace_s + RAY_STOP_S
    while True:
        try:
            out.state_after = str(api.job(job_id).get("status") or "")
        except ApiError:
            out.state_after = "not known"
        if out.state_after in FINAL or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    if out.state_after not in FINAL:
        out.left = [out.state_after]
        if out.state_before == "PENDING":
            out.said = (f"it is still {out.state_after}: Ray cannot stop a job whose entrypoint was never placed "
                        "(its job manager waits for the supervisor actor, and no HTTP API ends an actor); it ends "
                        "by itself after RAY_JOB_START_TIMEOUT_SECONDS (900 s by default), or at once from a "
                        f"driver: `ray.kill(ray.get_actor('_ray_internal_job_actor_{job_id}', "
                        "namespace='SUPERVISOR_ACTOR_RAY_NAMESPACE'))`; not tried")
    return out
