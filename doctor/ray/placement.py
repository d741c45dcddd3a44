"""Ray as a placement (`dfdoctor.placing`): a `ray job submit` line, `ray:JOB_ID`, and the run folders
`launch -- ray job submit` made. The answers are this package's (orchestrate.py, stop.py), imported when asked;
the launch sequence that asks them is `launch/pipeline.py`'s."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from dfdoctor.errors import UsageError
from dfdoctor.placing import Placement
from dfdoctor.ray.submit import is_ray_submit

if TYPE_CHECKING:  # annotations only: the answers are made where they are built (placing_answers.py)
    from dfdoctor.placing_answers import Judged, LaunchAsk, Started


class Ray(Placement):
    name = "ray"
    where = "in Ray"
    submitter = "ray job submit"
    target_scheme = "ray"

    def claims(self, ctx: Any) -> bool:
        return is_ray_submit(ctx.command)

    def report_target(self, ctx: Any) -> str:
        """`ray://HEAD:PORT`: the head the line submits to (never `local`, where only `ray job submit` runs)."""
        from dfdoctor.ray import submit, targets
        return targets.spelled(submit.parse(ctx.command, ctx.cwd, ctx.env).address)

    def line_for_target(self, spec: str, command: list[str]) -> list[str]:
        """`--target ray://HEAD[:8265]`: the `ray job submit` line to that head's job server (targets.py)."""
        from dfdoctor.ray import targets
        return targets.line_for(spec, command)

    def job_of(self, ref: str) -> str:
        job_id = ref.split(":", 1)[1]
        if not job_id or "/" in job_id:
            raise UsageError(f"{ref}: name the Ray job (ray:raysubmit_XXXX, as `ray job list` shows it)")
        return job_id

    def check(self, ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
        from dfdoctor.ray import orchestrate
        return orchestrate.check_records(ctx, only, skip)

    def start(self, ctx: Any, ask: LaunchAsk, timeline: list) -> Started:
        from dfdoctor.ray import orchestrate
        return orchestrate.start(ctx, ask, timeline)

    def watch(self, ctx: Any, ask: LaunchAsk, job: Started, records: list, timeline: list) -> Judged:
        from dfdoctor.ray import orchestrate
        return orchestrate.watch_job(ask, job, timeline)

    def output_instead_of_log(self, ctx: Any, run: dict[str, Any]) -> Any:
        from dfdoctor.ray import orchestrate
        return orchestrate.output_instead_of_log(ctx, run)

    def status(self, cwd: Path, ref: Optional[str], watch_s: float, cfg: Any = None,
               only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> Any:
        from dfdoctor.ray import orchestrate
        return orchestrate.status(cwd, ref, watch_s)

    def stop(self, job_id: str, grace_s: float, spec: Optional[dict[str, Any]] = None) -> Any:
        """Ray's stop endpoint, at the address of the run's line (a `ray:ID`: RAY_ADDRESS or Ray's default)."""
        from dfdoctor.ray import stop, submit
        address = ((spec or {}).get("ray") or {}).get("address") or \
            submit.parse(["ray", "job", "submit"], Path("."), os.environ).address
        return stop.stop(job_id, grace_s, address, dict(os.environ))


RAY = Ray()
