"""What the compile.race cache saves: `dfdoctor check --only compile.race` on the bundled trainer, the first time
(an empty cache: the reproduction runs, 3 runs without and 3 with the guard) against the second (the same
interpreter, torch and settings: the conclusive answer is reused), side by side in each round.

Each round gets a fresh cache folder (XDG_CACHE_HOME), runs cold then warm, and checks that the warm answer says
it was reused and agrees with the cold one. Prints medians and the ratio, and writes JSON.

    .venv/bin/python bench/race_cache.py --rounds 3 --out bench/results/race_cache.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DFDOCTOR = str(Path(sys.executable).parent / "dfdoctor")


def run_check(cache: str) -> tuple[float, dict]:
    """One `dfdoctor check --only compile.race` of the trainer: wall seconds and the check's record."""
    env = dict(os.environ, XDG_CACHE_HOME=cache, NO_COLOR="1")
    t = time.monotonic()
    p = subprocess.run([DFDOCTOR, "check", "--only", "compile.race", "--format", "json", "--", sys.executable, "-m",
                        "trainer", "--preset", "tiny"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    took = time.monotonic() - t
    return took, json.loads(p.stdout)["checks"][0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cold, warm, rounds = [], [], []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="dfdoctor-race-cache-") as cache:
            c_s, c_rec = run_check(cache)
            w_s, w_rec = run_check(cache)
        reused = "reused_from" in w_rec["data"]
        agree = all(c_rec["data"].get(k) == w_rec["data"].get(k) for k in ("reproduced", "guard_failures"))
        cold.append(c_s)
        warm.append(w_s)
        rounds.append({"cold_s": round(c_s, 2), "warm_s": round(w_s, 2), "reused": reused, "agree": agree,
                       "status": c_rec["status"], "reproduced": c_rec["data"].get("reproduced")})
        print(f"round {i + 1}: cold {c_s:.2f} s, warm {w_s:.2f} s, reused={reused}, same answer={agree}",
              flush=True)
    result = {"cold_median_s": round(statistics.median(cold), 2), "warm_median_s": round(statistics.median(warm), 2),
              "ratio_cold_over_warm": round(statistics.median(cold) / statistics.median(warm), 1), "rounds": rounds}
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(r["reused"] and r["agree"] for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
