"""`dfdoctor stop` for a Ray job: Ray's own stop endpoint (POST /api/jobs/ID/stop), then the job API's word that
the job reached a final state. Never `ray stop`, which ends every Ray process of the machine, the cluster's too.

A job PENDING because its entrypoint asks for what no node has cannot be stopped this way: Ray's job manager
keeps waiting for its supervisor actor (RAY-FACTS.md), and no HTTP API ends an actor. That is said, with how.

A job's detached actors (`lifetime="detached"`, as Ray Train's autoscaling coordinator is) outlive it by Ray's
design: after the job ended, the state API's actors of its driver that are detached and not DEAD are listed as
what is left, each with the `ray.kill` that ends it (not tried: they may be meant to outlive it)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from dfdoctor.placing_answers import Ended
from dfdoctor.ray.api import Api, ApiError
from dfdoctor.ray.submit import DEFAULT_ADDRESS, http_address, token

POLL_S = 0.5
FINAL = ("STOPPED", "SUCCEEDED", "FAILED")
SUPERVISOR = "_ray_internal_job_actor_"  # the job manager's own actor of each job, ended with it
RAY_STOP_S = 10.0  # Ray's stop: SIGTERM to the entrypoint, SIGKILL after its own grace (3 s by default)


@dataclass
class RayStopped(Ended):
    """What the stop endpoint did to one Ray job, and the job API's status afterwards."""

    address: str = DEFAULT_ADDRESS
    asked: bool = False  # the stop endpoint was posted to (what it did not do is then `said`)
    detached: Optional[list[dict[str, Any]]] = None  # the job's detached actors still alive after it ended

    @property
    def was_running(self) -> bool:
        return self.state_before in ("PENDING", "RUNNING")

    def lines(self) -> list[str]:
        if self.said and self.asked:  # the NOT stopped line says why
            return [f"asked Ray to stop job {self.job_id} (it was {self.state_before}) through its stop endpoint"]
        if self.said:
            return [f"Ray did not stop job {self.job_id}: {self.said}"]
        if not self.was_running:
            return [f"Ray job {self.job_id} was already {self.state_before}: nothing to stop",
                    *self.detached_lines()]
        return [f"stopped Ray job {self.job_id} through its stop endpoint (it was {self.state_before}); Ray now "
                f"says {self.state_after or 'nothing'}", *self.detached_lines()]

    def detached_lines(self) -> list[str]:
        return [f"left alive: detached actor {_actor(a)}: Ray's stop ends a job's driver and its other actors, "
                f"never a detached one; `ray.kill(ray.get_actor({a.get('name')!r}, namespace="
                f"{a.get('ray_namespace')!r}))` from a driver ends it; not tried" for a in self.detached or []]

    def left_words(self) -> str:
        return f"Ray job {self.job_id} ({', '.join(self.left)})"

    def note(self) -> dict[str, Any]:
        what = f"Ray job {self.job_id}"
        how = f"Ray's stop endpoint for job {self.job_id} (it was {self.state_before}; Ray then said " \
              f"{self.state_after or 'nothing'})"
        return {"ray": {"job_id": self.job_id, "before": self.state_before, "after": self.state_after,
                        "left": self.left},
                "words": {"what": what, "how": how, "left": self.detached_lines(),
                          "again": "Submit it again (`dfdoctor launch -- ray job submit ...`) when you want it to "
                                   "run."}}


def _actor(a: dict[str, Any]) -> str:
    return f"{a.get('class_name') or '?'} {a.get('ray_namespace')}/{a.get('name')} ({a.get('state')}, pid " \
           f"{a.get('pid')})"


def detached_left(api: Api, job_id: str) -> list[dict[str, Any]]:
    """The job's detached actors that are not DEAD (its driver's id from the job API); none when it had no
    driver or the state API does not answer (nothing is claimed that was not seen)."""
    try:
        driver = api.job(job_id).get("job_id")
        if not driver:
            return []
        rows = api.listed("actors", filter_keys="job_id", filter_predicates="=", filter_values=driver)
    except ApiError:
        return []
    return [a for a in rows if a.get("is_detached") and a.get("state") != "DEAD"
            and not str(a.get("name") or "").startswith(SUPERVISOR)]


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
        return _with_detached(out, api)
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
    return _with_detached(out, api)


def _with_detached(out: RayStopped, api: Api) -> RayStopped:
    """The job ended: what of it Ray keeps alive by design (its detached actors) is what is left."""
    out.detached = detached_left(api, out.job_id)
    out.left += [f"detached actor {_actor(a)}" for a in out.detached]
    return out
