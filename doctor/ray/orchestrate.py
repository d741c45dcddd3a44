"""`check`, the launch's start and watch (the steps `launch/pipeline.py` asks for), and `status` for a
`ray job submit` line; the CLI only parses and prints.

The submission is the user's own line, run here with `--no-wait` (dfdoctor watches instead) and a
`--submission-id` dfdoctor chose (unless the line has one): Ray's CLI packs and uploads the working_dir as it
always does. Everything after is HTTP (`api.py`): dfdoctor never imports ray."""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any, Optional

from dfdoctor import causes
from dfdoctor.agent.names import LAUNCHER, SPEC
from dfdoctor.context import Context
from dfdoctor.diagnose.stopped import offer_stop, stop_note, stopped_verdict
from dfdoctor.engine import now_iso
from dfdoctor.errors import UsageError
from dfdoctor.launch.report import placed_report as _report, save_report, timeline_event as _event
from dfdoctor.model import CheckRecord, Report, Verdict
from dfdoctor.placing_answers import Judged, LaunchAsk, Started
from dfdoctor.ray import logs, precheck, submit, targets
from dfdoctor.ray.api import Api
from dfdoctor.ray.rules import Seen
from dfdoctor.ray.watch import watch
from dfdoctor.run import events
from dfdoctor.run.folder import RunFolder, find_run, new_run
from dfdoctor.run.masks import masked
from dfdoctor.safefile import write_atomically
from dfdoctor.unused_log import Instead

SUBMIT_TIMEOUT_S = 300.0  # `ray job submit` uploads the working_dir (up to 100 MiB)


def api_of(sub: submit.RaySubmission, env: dict[str, str]) -> Api:
    return Api(submit.http_address(sub.address), submit.token(env))


def check_records(ctx: Context, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[CheckRecord]:
    """`dfdoctor check -- ray job submit ...`: the Ray checks (--only/--skip globs pick them)."""
    sub = submit.parse(ctx.command, ctx.cwd, ctx.env)

    def wanted(cid: str) -> bool:
        return (not only or any(fnmatch.fnmatchcase(cid, p) for p in only)) and \
            not any(fnmatch.fnmatchcase(cid, p) for p in skip)
    return precheck.records(sub, api_of(sub, ctx.env), wanted, ctx.env)


def _run(spec: dict[str, Any], folder: Optional[Path], seen: Optional[Seen]) -> dict[str, Any]:
    info: dict[str, Any] = {"id": spec.get("run_id"), "dir": str(folder) if folder else None, "pid": None,
                            "exit_code": None, "signal": None}
    if seen is not None:
        info.update(exit_code=seen.job.get("driver_exit_code"),
                    ray={"job_id": seen.job_id, "address": seen.address, "status": seen.status,
                         "error_type": seen.job.get("error_type"), "driver_job_id": seen.job.get("job_id")})
    return info


def start(ctx: Context, ask: LaunchAsk, timeline: list[dict[str, Any]]) -> Started:
    """Submit the line (--no-wait, our submission id) into a new run folder; a failed submission is the verdict."""
    sub = submit.parse(ctx.command, ctx.cwd, ctx.env)
    run_id, folder = new_run(ctx.cwd, ask.run_dir)
    job_id = submit.submission_id(sub, f"dfdoctor-{run_id}")
    argv = submit.with_id(sub, job_id)
    RunFolder.at(folder).keep_prints(ctx.env, argv)
    api = api_of(sub, ctx.env)
    env_logs = logs.SetupLogs(api)
    env_logs.before()  # the setup logs hold earlier jobs' lines: only what this job adds is read
    said, ok = _submit(argv, ctx)
    timeline.append(_event("submitted", f"ray job {job_id}" if ok else f"ray job submit failed: {said[-300:]}"))
    spec: dict[str, Any] = {"run_id": run_id, "argv": argv, "cwd": str(ctx.cwd), "target": "local",
                            "ray": {"job_id": job_id if ok else None, "address": sub.address, "submit": said[-2000:]}}
    write_atomically(folder / SPEC, json.dumps(masked(spec, ctx.env, argv), indent=1), private=True)
    if not ok:
        return Started(run_id, folder, refused=_refused(said, sub), run=_run(spec, folder, None))
    RunFolder.at(folder).append_event("submitted", job_id=job_id, address=sub.address)
    return Started(run_id, folder, handle=(sub, api, env_logs, job_id, spec))


def watch_job(ask: LaunchAsk, job: Started, timeline: list[dict[str, Any]]) -> Judged:
    """Watch the submitted job over HTTP, about once a second, and judge it."""
    sub, api, env_logs, job_id, spec = job.handle
    seen = Seen(job_id, sub.address, wants=sub.wants)
    seen, verdict = watch(api, job_id, seen, ask.watch_s, ask.settle_s,
                          on_event=lambda n, d: timeline.append(_event(n, d)), env_logs=env_logs)
    return Judged(offer_stop(verdict, job.run_id), _run(spec, job.run_dir, seen))


def output_instead_of_log(ctx: Context, run: dict[str, Any]) -> Instead:
    """A Ray job's driver output stays in Ray's logs (nothing is written here): read with `ray job logs`, by the
    job id once submitted (the line's --submission-id, else the one dfdoctor chose)."""
    sub = submit.parse(ctx.command, ctx.cwd, ctx.env)
    job_id = (run.get("ray") or {}).get("job_id") or submit.submission_id(sub, "JOB_ID")
    shown = f"`ray job logs {job_id} --address {sub.address}`"
    return Instead(f"Ray keeps the job's output in its own logs; {shown} shows it",
                   f"read the job's output with {shown} (or the Ray dashboard); drop --log, which a Ray launch "
                   "never opens")


def _submit(argv: list[str], ctx: Context) -> tuple[str, bool]:
    """Run the submission (it returns once Ray has the job: --no-wait); (what it said, whether Ray took it)."""
    try:
        p = subprocess.run(argv, cwd=ctx.cwd, env=ctx.env, capture_output=True, text=True,
                           timeout=SUBMIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc), False
    return (p.stdout + p.stderr).strip(), p.returncode == 0


def _refused(said: str, sub: submit.RaySubmission) -> Verdict:
    """`ray job submit` failed: in its own words (its last line), with the cause when it is one we know."""
    last = next((l.strip() for l in reversed(said.splitlines()) if l.strip()), "?")
    cause = None
    if "413" in said or "Request Entity Too Large" in said:
        cause = causes.RAY_RUNTIME_ENV_FAILED
    elif "Connection refused" in said or "Failed to connect" in said or "401" in said:
        cause = causes.TARGET_UNREACHABLE
    elif "command not found" in said or "No such file" in said:
        cause = causes.COMMAND_NOT_FOUND
    return Verdict("failed", cause, f"`ray job submit` did not submit the job: {last[:400]}",
                   "Fix what it names; `dfdoctor check -- ray job submit ...` asks the cluster first.",
                   [f"ray job submit to {sub.address}: {last[:400]}"])


def status(cwd: Path, ref: Optional[str], watch_s: float) -> Report:
    """`status ray:JOB_ID` (any Ray job, at RAY_API_SERVER_ADDRESS/RAY_ADDRESS or Ray's default) or `status RUN`
    of a run `launch -- ray job submit` made."""
    import os
    started = now_iso()
    folder: Optional[Path] = None
    if ref and ref.startswith("ray:"):
        job_id, spec = ref.split(":", 1)[1], {}
        if not job_id:
            raise UsageError(f"{ref}: name the Ray job (ray:raysubmit_XXXX, as `ray job list` shows it)")
        address = submit.parse(["ray", "job", "submit"], cwd, os.environ).address
    else:
        folder = find_run(cwd, ref)
        spec = json.loads((folder / SPEC).read_text())
        job_id, address = spec["ray"].get("job_id"), spec["ray"]["address"]
    ctx = Context(command=list(spec.get("argv") or []), cwd=Path(spec.get("cwd") or cwd))
    if not job_id:
        v = Verdict("failed", None, f"`ray job submit` did not submit this job: {spec['ray'].get('submit', '')[-300:]}",
                    "Submit it again.")
        return _report(ctx, "status", started, v, [], [], _run(spec, folder, None), targets.spelled(address))
    api = Api(submit.http_address(address), submit.token(dict(os.environ)))
    seen, verdict = watch(api, job_id, Seen(job_id, address), watch_s)
    run_ref = (spec.get("run_id") or folder.name) if folder is not None else f"ray:{job_id}"
    verdict = offer_stop(verdict, run_ref)
    note = stop_note(events.read(folder / LAUNCHER)) if folder is not None else None
    if note is not None and seen.status == "STOPPED":  # the stop was `dfdoctor stop`'s: the user's own
        verdict = stopped_verdict(note, run_ref, seen.evidence())
    report = _report(ctx, "status", started, verdict, [], [], _run(spec, folder, seen), targets.spelled(address))
    if folder is not None:
        save_report(folder, report)
    return report
