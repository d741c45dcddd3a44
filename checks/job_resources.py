"""job.resources: what the job used (peak memory, CPU, wall time) and whether memory came close to its limit.

Numbers the verdict does not need but a reader does: a job that peaked at 95 % of its cgroup's limit will be
OOM-killed by the next, slightly larger batch. Read from the recorder's exit record and its memory cgroup.
"""

from __future__ import annotations

from pathlib import Path

from dfdoctor import check, ok, skip, warn
from dfdoctor.run.record import load

NEAR_LIMIT = 0.9  # warn when the peak reached this share of the memory limit


@check("job.resources", title="Peak memory and CPU of the job", phases=("post",), timeout=10)
def job_resources(ctx):
    """Report the exit record's resource use; warn when memory came near the limit."""
    if not ctx.run or not ctx.run.get("dir"):
        yield skip("no launched run to look at")
        return
    run = load(Path(ctx.run["dir"]))
    unlimited = run.first("memory-limit-failed")
    if unlimited:  # asked for and silently absent would be worse than no limit at all
        yield warn(f"--memory-limit was NOT applied: {unlimited.get('error')}; the job runs without it",
                   evidence=(f"the recorder could not create a memory cgroup under {unlimited.get('cgroup')}",),
                   fix="Launch where a memory cgroup can be made (the host, or a container given a delegated, "
                       "writable cgroup), or drop --memory-limit and watch job.resources' peak instead.")
    ex = run.exit
    if not ex:
        usage = (run.heartbeat or {}).get("usage") or {}
        if usage:
            now = "ended (not reaped yet); at its last heartbeat" if _unreaped(run, ctx.run) else "running"
            yield ok(f"{now}: {usage.get('rss', 0) / 2**20:.0f} MiB resident, {usage.get('cpu_s', 0):.1f} s CPU",
                     data={"resources": usage})
        else:
            yield skip("the job did not run long enough to measure")
        return
    peak = (ex.get("max_rss_kb") or 0) * 1024
    facts = {"peak_rss_bytes": peak, "cpu_s": round((ex.get("utime_s") or 0) + (ex.get("stime_s") or 0), 3),
             "wall_s": ex.get("wall_s")}
    summary = (f"peak {peak / 2**20:.0f} MiB resident, {facts['cpu_s']:.1f} s CPU in {ex.get('wall_s')} s")
    limit_ev = run.first("memory-limit")
    if limit_ev and peak >= NEAR_LIMIT * limit_ev["limit"]:
        yield warn(f"{summary}: {100 * peak / limit_ev['limit']:.0f} % of the {limit_ev['limit'] / 2**20:.0f} MiB limit",
                   fix="Raise --memory-limit or reduce the job's memory (batch size, workers).",
                   data={"resources": facts})
        return
    yield ok(summary, data={"resources": facts})


def _unreaped(run, info: dict) -> bool:
    """The job's process has exited and is a zombie (its recorder has not reaped it): not running. On a target,
    as its agent read the state there (the report's run object, `info`, says it)."""
    if run.is_remote:
        return info.get("job_state") == "Z"
    if not run.job_pid:
        return False
    import psutil

    try:
        return psutil.Process(run.job_pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
