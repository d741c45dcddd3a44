"""What a checked `launch --target pct://` costs beyond `--no-check` in CPU, here and on the target (issue 45, round
19: under load every CPU-second of the gate competes with the load). For each version, runs alternate between a
checked launch and the same launch with `--no-check`; each is timed for its wall seconds, the CPU seconds of
dfdoctor's process tree here (its children's rusage: the checks' workers, the relay's end, ssh) and the CPU
seconds container 200 spent meanwhile (its cgroup's cpuacct.usage: the relay, the probes, the recorder and the job;
the job is the same in both). The medians of checked minus --no-check are the gate's.

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/gate_cpu.py [--version before=main] [--version after=.] [--runs 6] [--out FILE]
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# (the same package trees and job)
from remote_launch_running import (  # noqa: E402
    JOB, compiled_trees, in_turns, infra_settings, versions_cli, pct_target, write_result)


def container_ns(vmid: str) -> int:
    """CPU nanoseconds the container's processes used so far (its init's cpuacct cgroup)."""
    pid = subprocess.run(["lxc-info", "-n", vmid, "-pH"], capture_output=True, text=True, check=True).stdout.strip()
    group = next(ln.split(":", 2)[2] for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                 if ln.split(":")[1] in ("cpuacct", "cpu,cpuacct"))
    return int(Path(f"/sys/fs/cgroup/cpuacct{group}/cpuacct.usage").read_text())


def children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def one(argv: list, env: dict, cwd: str, vmid: str, host_side: Path) -> dict:
    (host_side / "stop").unlink(missing_ok=True)
    cpu0, ns0, began = children_cpu(), container_ns(vmid), time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    wall, here, there = time.perf_counter() - began, children_cpu() - cpu0, (container_ns(vmid) - ns0) / 1e9
    (host_side / "stop").touch()
    time.sleep(1.0)
    state = json.loads(p.stdout)["verdict"]["state"] if p.stdout.strip() else None
    if state != "running":
        raise SystemExit(f"not running ({state}): {p.stderr[-1500:]}")
    return {"wall": round(wall, 3), "cpu_here": round(here, 3), "cpu_target": round(there, 3)}


def main() -> None:
    args, revs = versions_cli(__doc__, runs=6)
    infra = infra_settings()
    vmid = infra["DFDOCTOR_INFRA_VMID"]
    target = pct_target(infra)
    host_side = Path("/var/lib/lxc") / vmid / "rootfs" / f"dfd-gatecpu-{uuid.uuid4().hex[:8]}"
    inside = "/" + host_side.name
    host_side.mkdir(parents=True)
    (host_side / "t.py").write_text(JOB)
    rows: dict = {}
    loads = []
    try:
        with tempfile.TemporaryDirectory(prefix="dfd-gatecpu-") as tmp:
            paths = compiled_trees(revs, Path(tmp))
            for i in range(args.runs):
                for name, path in in_turns(paths, i):
                    launch = [sys.executable, "-m", "dfdoctor", "launch", "--target", target, "--cwd", inside, "--log",
                              f"{inside}/train.log", "--format", "json", "--", "python3", "-u", f"{inside}/t.py"]
                    for who, argv in (("no-check", launch[:4] + ["--no-check"] + launch[4:]), ("checked", launch)):
                        fresh = Path(tmp) / uuid.uuid4().hex[:8]
                        env = dict(os.environ, PYTHONPATH=str(path), PYTHONDONTWRITEBYTECODE="1",
                                   DFDOCTOR_SSH_CONFIG=infra["DFDOCTOR_SSH_CONFIG"],
                                   XDG_CACHE_HOME=str(fresh / "cache"), XDG_STATE_HOME=str(fresh / "state"))
                        r = one(argv, env, tmp, vmid, host_side)
                        rows.setdefault(name, {}).setdefault(who, []).append(r)
                        loads.append(os.getloadavg()[0])
                        print(f"{name} {who}: {r}", file=sys.stderr, flush=True)
    finally:
        (host_side / "stop").touch()
        time.sleep(1.0)
        shutil.rmtree(host_side, ignore_errors=True)
    med = {n: {who: {k: round(statistics.median(r[k] for r in rs), 3) for k in ("wall", "cpu_here", "cpu_target")}
               for who, rs in byw.items()} for n, byw in rows.items()}
    gate = {n: {k: round(m["checked"][k] - m["no-check"][k], 3) for k in ("wall", "cpu_here", "cpu_target")}
            for n, m in med.items()}
    out = {"versions": revs, "runs": args.runs,
           "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
           "medians": med, "gate (checked - no-check)": gate, "all": rows}
    write_result(out, args.out)


if __name__ == "__main__":
    main()
