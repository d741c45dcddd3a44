"""Where a checked `launch --target pct://` spends its time before the start, two versions side by side (issue 45,
round 15): for each run, the gate's own seconds (the timeline's `pre-checks` entry: the checks the start waited
for), the seconds from dfdoctor's start to `launched` (the recorder started there), and to the verdict `running`.
Runs alternate between the versions, each with fresh cache and state folders (a newcomer's).

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/checked_gate.py [--version before=main] [--version after=.] [--runs 6] [--out FILE]
"""

from __future__ import annotations

import json
import os
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
    JOB, compiled_trees, in_turns, infra_settings, versions_cli, write_result)


def one(path: Path, infra: dict, inside: str, host_side: Path, tmp: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(path), PYTHONDONTWRITEBYTECODE="1",
               DFDOCTOR_SSH_CONFIG=infra["DFDOCTOR_SSH_CONFIG"], XDG_CACHE_HOME=str(tmp / uuid.uuid4().hex[:8]),
               XDG_STATE_HOME=str(tmp / uuid.uuid4().hex[:8]))
    target = f"pct://root@127.0.0.1:{infra['DFDOCTOR_INFRA_SSH_PORT']}/{infra['DFDOCTOR_INFRA_VMID']}"
    (host_side / "stop").unlink(missing_ok=True)
    began = time.time()
    p = subprocess.run([sys.executable, "-m", "dfdoctor", "launch", "--target", target, "--cwd", inside, "--log",
                        f"{inside}/train.log", "--format", "json", "--", "python3", "-u", f"{inside}/t.py"],
                       capture_output=True, text=True, env=env, cwd=str(tmp), timeout=300)
    wall = time.time() - began
    (host_side / "stop").touch()
    time.sleep(1.0)
    doc = json.loads(p.stdout)
    if doc["verdict"]["state"] != "running":
        raise SystemExit(f"not running: {doc['verdict']}")
    pre = next(e for e in doc["timeline"] if e["event"] == "pre-checks")
    launched = next(e["t"] for e in doc["timeline"] if e["event"] == "launched")
    return {"gate": float(pre["detail"].split(" in ")[1].split()[0]), "to_launched": launched - began, "wall": wall,
            "gated": int(pre["detail"].split()[0]), "checks": len([c for c in doc["checks"] if c["phase"] == "pre"])}


def main() -> None:
    args, revs = versions_cli(__doc__, runs=6)
    infra = infra_settings()
    rootfs = Path("/var/lib/lxc") / infra["DFDOCTOR_INFRA_VMID"] / "rootfs"
    inside = f"/dfd-gate-{uuid.uuid4().hex[:8]}"
    host_side = rootfs / inside.lstrip("/")
    host_side.mkdir(parents=True)
    (host_side / "t.py").write_text(JOB)
    rows: dict[str, list[dict]] = {n: [] for n in revs}
    loads = []
    try:
        with tempfile.TemporaryDirectory(prefix="dfd-gate-") as tmp:
            paths = compiled_trees(revs, Path(tmp))
            for i in range(args.runs):
                for name, path in in_turns(paths, i):
                    rows[name].append(one(path, infra, inside, host_side, Path(tmp)))
                    loads.append(os.getloadavg()[0])
                    r = rows[name][-1]
                    print(f"{name}: gate {r['gate']:.2f} s ({r['gated']} of {r['checks']} checks), launched at "
                          f"{r['to_launched']:.2f} s, running at {r['wall']:.2f} s", file=sys.stderr, flush=True)
    finally:
        (host_side / "stop").touch()
        time.sleep(1.0)
        shutil.rmtree(host_side, ignore_errors=True)
    out = {"versions": revs, "runs": args.runs, "load_1min": {"min": min(loads), "median": statistics.median(loads),
                                                               "max": max(loads)},
           "medians": {n: {k: round(statistics.median(r[k] for r in rs), 3) for k in ("gate", "to_launched", "wall")}
                       for n, rs in rows.items()},
           "all": rows}
    write_result(out, args.out)


if __name__ == "__main__":
    main()
