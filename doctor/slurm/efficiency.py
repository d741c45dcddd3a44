"""What `seff` tells users about a finished job: how much of what it asked for it used. CPU efficiency is the
CPU time its processes used (sacct's TotalCPU) against cores x elapsed (AllocCPUS x ElapsedRaw); memory
efficiency is its peak resident memory (MaxRSS, the largest of its steps) against its --mem (ReqMem)."""

from __future__ import annotations

import re
from typing import Optional

from dfdoctor.slurm.job import JobFacts, mib


def cpu_seconds(total_cpu: str) -> Optional[float]:
    """sacct's TotalCPU (`00:03.977`, `01:02:03`, `1-02:03:04.5`) in seconds; None when unreadable."""
    m = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$", total_cpu or "")
    if not m:
        return None
    d, h, mi = (int(x) if x else 0 for x in m.groups()[:3])
    return ((d * 24 + h) * 60 + mi) * 60 + float(m[4])


def summary(j: JobFacts) -> Optional[str]:
    """`CPU efficiency 49% (3.98 s of 2 cores x 4 s); memory efficiency 33% (MaxRSS 66.8 MiB of 200M)`, or None
    when sacct has not the figures (no accounting, or a job still running)."""
    parts = []
    cpu = cpu_seconds(j.total_cpu)
    if cpu is not None and j.alloc_cpus and j.elapsed_s:
        pct = 100 * cpu / (j.alloc_cpus * j.elapsed_s)
        parts.append(f"CPU efficiency {pct:.0f}% ({cpu:.2f} s of {j.alloc_cpus} core(s) x {j.elapsed_s} s)")
    req = mib(j.req_mem)
    rss = mib(j.max_rss) if j.max_rss else None
    if req and rss:
        parts.append(f"memory efficiency {100 * rss / req:.0f}% (MaxRSS {rss:.1f} MiB of {j.req_mem})")
    elif req and j.ended and "sacct" in j.source:
        length = f"the job of {j.elapsed_s} s" if j.elapsed_s else "the job"
        parts.append(f"memory use not recorded (MaxRSS is sampled every 2 s or so; {length} was too short), "
                     f"of {j.req_mem} asked")
    return "; ".join(parts) or None
