"""`check` over the nodes of an allocation against `check` on one node, on the two-node cluster of
tests/infra/slurm_pair.sh (nodes n1 and n2: two slurmds of this one host, so both nodes share its 2 cores).

    sudo bash tests/infra/slurm_pair.sh      # once (the test suite does it too)
    .venv/bin/python bench/slurm_nodes.py [RUNS]   -> bench/results/slurm_nodes.json

Cases, each RUNS times, side by side in one run:
  here        `check` on this host, no Slurm
  nodes1      `check --slurm-nodes 1`  (one srun over a new 1-node allocation)
  nodes2      `check --slurm-nodes 2`  (one srun over both nodes: a report with a row per node)
and the same three for `cuda.nccl` with the gloo backend (2 ranks per node; over 2 nodes one group of 4).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAIR_CONF = Path(os.environ.get("DFDOCTOR_SLURM_PAIR_DIR", "/var/lib/dfdoctor-slurm-pairnet")) / "etc" / "slurm.conf"
LIGHT = ["--only", "imports.smoke", "--only", "deps.requirements", "--only", "log.writable", "--only", "launch.path"]
NCCL = ["--only", "cuda.nccl"]


def timed(tmp: Path, extra: list[str], only: list[str]) -> tuple[float, int, int]:
    """Seconds, exit code, rows of one `check`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_CONF=str(PAIR_CONF), DFDOCTOR_NCCL_BACKEND="gloo")
    out = tmp / "c.json"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "dfdoctor", "check", *extra, *only, "--log", str(tmp / "train.log"),
                        "--format", "json", "--output", str(out), "--", sys.executable, "-c", "import json"],
                       cwd=tmp, capture_output=True, env=env, timeout=600)
    took = round(time.monotonic() - t0, 3)
    doc = json.loads(out.read_text()) if out.exists() else {}
    return took, p.returncode, len(doc.get("targets") or [doc] if doc else [])


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cases = {"here": [], "nodes1": ["--slurm-nodes", "1"], "nodes2": ["--slurm-nodes", "2"]}
    result: dict = {"command": f"python bench/slurm_nodes.py {runs}",
                    "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "machine": f"{os.cpu_count()}-core VM; Slurm 22.05 two nodes of one host (tests/infra/slurm_pair.sh)"}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for label, only in (("light", LIGHT), ("nccl_gloo", NCCL)):
            got: dict = {name: [] for name in cases}
            for _ in range(runs):  # interleaved, so a change of load hits every case alike
                for name, extra in cases.items():
                    got[name].append(timed(tmp, extra, only))
            result[label] = {name: {"median_s": statistics.median(t for t, _, _ in v), "all_s": [t for t, _, _ in v],
                                    "exit": sorted({rc for _, rc, _ in v}), "rows": sorted({n for _, _, n in v})}
                             for name, v in got.items()}
            here = result[label]["here"]["median_s"]
            for name in ("nodes1", "nodes2"):
                result[label][name]["ratio_vs_here"] = round(result[label][name]["median_s"] / here, 2)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "slurm_nodes.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: {n: (v[n]["median_s"], v[n].get("ratio_vs_here")) for n in v} for k, v in result.items()
                      if isinstance(v, dict)}, indent=1))


if __name__ == "__main__":
    main()
