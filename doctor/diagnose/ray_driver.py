"""A driver run here (`dfdoctor launch -- python train.py` whose script calls `ray.init()`): which Ray cluster it
joined, or that it started a private one, in Ray's own words (worker.py's INFO lines on the driver's stderr):

    Using address 127.0.0.1:6379 set in the environment variable RAY_ADDRESS
    Connecting to existing Ray cluster at address: 10.0.0.5:6379...
    Connected to Ray cluster. View the dashboard at http://10.0.0.5:8265
    Started a local Ray instance. View the dashboard at http://127.0.0.1:8265

Every verdict of such a run says it (evidence). A driver whose environment named a cluster (RAY_ADDRESS) and
that started a private instance all the same (`ray.init(address="local")`, a `ray.init(num_cpus=...)` that Ray
took for a new cluster) is `ray-wrong-cluster`: its tasks run here, on none of that cluster's nodes."""

from __future__ import annotations

import re
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord
from dfdoctor.lazy_re import compile_later

_ANSI = compile_later(r"\x1b\[[0-9;]*m")
CONNECTING = compile_later(r"Connecting to existing Ray cluster at address: (\S+?)(?:\.\.\.)?\s*$", re.M)
DASHBOARD = compile_later(r"(?:Connected to Ray cluster|Started a local Ray instance)\.? View the dashboard at (\S+)")
STARTED = compile_later(r"Started a local Ray instance", re.M)
FROM_ENV = compile_later(r"Using address (\S+) set in the environment variable (RAY_ADDRESS)")
RAY_LINE = compile_later(r"INFO worker\.py:\d+ -- ")


def _ray_lines(run: RunRecord) -> str:
    """Ray's worker.py lines of the driver's output (stderr, where Ray's logger writes; stdout too)."""
    text = _ANSI.sub("", run.stream("stderr") + "\n" + run.stream("stdout"))
    return "\n".join(line for line in text.splitlines() if RAY_LINE.search(line))


def _meant(run: RunRecord) -> str:
    """The cluster the driver's environment named (RAY_ADDRESS), as it was when the job started."""
    return str(((run.spawned or {}).get("env") or {}).get("RAY_ADDRESS") or "")


def joined(run: RunRecord) -> list[str]:
    """What Ray said of the cluster the driver joined or started: evidence lines (none for a driver-less run)."""
    lines = _ray_lines(run)
    if not lines:
        return []
    dashboard = DASHBOARD.search(lines)
    at = f" (its dashboard: {dashboard[1]})" if dashboard else ""
    if STARTED.search(lines):
        return [f"ray: the driver's ray.init() started a private local Ray instance{at}; it joined no existing "
                "cluster" + (f" (RAY_ADDRESS was {_meant(run)})" if _meant(run) else "")]
    connected = CONNECTING.search(lines)
    if connected:
        env = FROM_ENV.search(lines)
        how = f", the address {env[1]} from {env[2]}" if env else ""
        return [f"ray: the driver's ray.init() joined the Ray cluster at {connected[1]}{at}{how}"]
    return []


def with_evidence(verdict: Verdict, run: RunRecord) -> Verdict:
    """`verdict` with the cluster the driver joined added to its evidence (once)."""
    for line in joined(run):
        if line not in verdict.evidence:
            verdict.evidence.append(line)
    return verdict


def wrong_cluster(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """RAY_ADDRESS named a cluster and the driver started a private instance instead."""
    meant = _meant(run)
    lines = _ray_lines(run)
    if not meant or not STARTED.search(lines):
        return None
    still = "" if run.finished else f" `dfdoctor stop {run.id}` ends this one."
    return Verdict("failed", causes.RAY_WRONG_CLUSTER,
                   f"The driver did not join the Ray cluster at {meant} (RAY_ADDRESS): its `ray.init()` started a "
                   "private local Ray instance here, so nothing of the job runs on that cluster.",
                   "Call `ray.init()` with no address (it takes RAY_ADDRESS) or `ray.init(address=\"auto\")`; drop "
                   f"`address=\"local\"` or any other address it is given; not tried.{still}",
                   [next(line.strip() for line in lines.splitlines() if STARTED.search(line))[:300]])
