"""What settling costs and what it buys (issue 23/26): `dfdoctor launch` of real jobs with --settle 0 (the old
rule: two seconds of steady output) and with the default 10 s, side by side in one run.

- healthy: healthy.py (a line every 0.2 s): time until the verdict (the cost);
- dies-late: torchrun, 2 gloo ranks logging; rank 1 exits 1 three seconds into training: the verdict (what it buys).
Run: .venv/bin/python bench/settle_cost.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from jobs.harness import PY, job, kill_runs, launch  # noqa: E402

CASES = {
    "healthy": job("healthy.py", "40"),
    "dies-late": [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                  job("ddp_rank_dies_late.py")[1]],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    rows = []
    for name, cmd in CASES.items():
        for settle in ("0", "10"):
            for _ in range(a.repeat):
                with tempfile.TemporaryDirectory() as d:
                    work = Path(d)
                    t = time.monotonic()
                    _, rep = launch(work, *cmd, watch=60, log=None, extra=("--settle", settle))
                    took = time.monotonic() - t
                    kill_runs(work)
                v = rep["verdict"]
                rows.append({"case": name, "settle": float(settle), "verdict": v["state"], "cause": v["cause"],
                             "seconds": round(took, 1)})
                print(json.dumps(rows[-1]), flush=True)
    for name in CASES:
        for settle in (0.0, 10.0):
            r = [x for x in rows if x["case"] == name and x["settle"] == settle]
            said = sorted({f"{x['verdict']}" + (f" [{x['cause']}]" if x["cause"] else "") for x in r})
            print(f"{name:10s} --settle {settle:4g}: verdict after {min(x['seconds'] for x in r):.1f}-"
                  f"{max(x['seconds'] for x in r):.1f} s; said {', '.join(said)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
