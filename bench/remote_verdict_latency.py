"""How fast `dfdoctor launch --target pct://...` gives its verdict after a job in the container dies, side by side
with the same job launched locally (same machine, same moment, so the ratio survives a noisy machine).

A job prints a line, sleeps a varying time (so deaths fall at every phase of the watcher's polling), writes the
moment of its death into a file and exits 1. Latency = when dfdoctor's verdict line arrives on its stdout minus
that moment. The pre-launch checks are skipped (they run before the job); the post-launch checks run.
Also: the cost of one look (one session on the target reading the run folder) with a shared connection.

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/remote_verdict_latency.py --runs 10 [--json bench/results/remote_verdict_latency.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DFDOCTOR = str(Path(sys.executable).parent / "dfdoctor")
INFRA_ENV = Path("/var/lib/dfdoctor-infra/env")
JOB = ("import sys, time\nprint('step 0', flush=True)\ntime.sleep(float(sys.argv[2]))\n"
       "open(sys.argv[1], 'w').write(repr(time.time()))\nraise SystemExit(1)\n")


def _one(target: str, cwd: str, host_side: Path, local: Path, delay: float, env: dict) -> float:
    """Launch the dying job once on `target`; the seconds from its death to the verdict on stdout."""
    stamp = f"died-{uuid.uuid4().hex[:6]}"
    args = [DFDOCTOR, "launch", "--no-check", "--watch", "30", "--cwd", cwd]
    if target != "local":
        args += ["--target", target, "--skip", "persistence.session"]
    p = subprocess.Popen([*args, "--", "python3", f"{cwd}/job.py", f"{cwd}/{stamp}", f"{delay:.2f}"], cwd=local,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = p.stdout.readline()
    seen = time.time()
    p.communicate(timeout=60)
    assert "FAILED" in first, first
    return seen - float((host_side / stamp).read_text())


def _look_cost(target: str, remote_dir: str, n: int = 10) -> float:
    """Median seconds of one look at a run folder on the target, over one shared ssh connection."""
    from dfdoctor.targets import parse_target, transport
    from dfdoctor.launch import remote_run
    times = []
    with transport.connected(parse_target(target)):
        for _ in range(n):
            t0 = time.monotonic()
            remote_run.fetch(target, remote_dir)
            times.append(time.monotonic() - t0)
    return statistics.median(times)


def main() -> int:
    """Alternate local and pct:// launches; print and optionally save the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    values = dict(line.split("=", 1) for line in INFRA_ENV.read_text().splitlines() if "=" in line)
    target = f"pct://root@127.0.0.1:{values['DFDOCTOR_INFRA_SSH_PORT']}/{values['DFDOCTOR_INFRA_VMID']}"
    env = dict(os.environ, DFDOCTOR_SSH_CONFIG=values["DFDOCTOR_SSH_CONFIG"], XDG_CACHE_HOME="/tmp/dfd-bench-cache",
               NO_COLOR="1")
    os.environ["DFDOCTOR_SSH_CONFIG"] = values["DFDOCTOR_SSH_CONFIG"]
    name = f"dfd-bench-{uuid.uuid4().hex[:6]}"
    cwd = f"/tmp/{name}"
    sides = {"local": Path(cwd), target: Path("/var/lib/lxc") / values["DFDOCTOR_INFRA_VMID"] / "rootfs" / "tmp" / name}
    local = Path(f"/tmp/{name}-here")
    local.mkdir()
    for side in sides.values():
        side.mkdir()
        (side / "job.py").write_text(JOB)
    lat: dict[str, list[float]] = {"local": [], target: []}
    for i in range(a.runs):
        delay = 1.0 + (i % 7) * 0.13
        for t in ("local", target):
            lat[t].append(_one(t, cwd, sides[t], local, delay, env))
    remote_dirs = sorted((sides[target] / ".dfdoctor" / "runs").iterdir())
    look = _look_cost(target, f"{cwd}/.dfdoctor/runs/{remote_dirs[-1].name}")
    out = {"runs": a.runs, "target": target, "median_look_s": round(look, 3)}
    for t, xs in lat.items():
        xs = sorted(xs)
        out["local" if t == "local" else "pct"] = {"median_s": round(statistics.median(xs), 3),
                                                   "p90_s": round(xs[int(0.9 * (len(xs) - 1))], 3),
                                                   "max_s": round(xs[-1], 3)}
    out["ratio_median_pct_to_local"] = round(out["pct"]["median_s"] / out["local"]["median_s"], 1)
    for side in [*sides.values(), local]:  # the jobs ended by themselves; their folders go too
        shutil.rmtree(side, ignore_errors=True)
    print(json.dumps(out, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
