"""Does the public guard fix a user-shaped script? Runs bench/user_threads.py N times without and N times with
`dfdoctor.guard.compile_guard` (as the fix text says), then once with --throughput (warm steps unguarded vs
guarded, side by side in one process). Writes bench/results/guard_user_<label>.json.

    .venv/bin/python bench/guard_user.py --runs 20 --label cpu                 # CPU, torch 2.13
    python3 bench/guard_user.py --runs 5 --label h200 -- --device cuda --model flex   # the H200
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SCRIPT = ROOT / "user_threads.py"


def one(extra: list[str], timeout: float) -> dict:
    """One process; its JSON answer, or what happened when it gave none."""
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, str(SCRIPT), *extra], capture_output=True, text=True, timeout=timeout)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        out = json.loads(lines[-1]) if lines else {"outcome": "broken", "stderr": p.stderr[-1500:]}
        if out.get("outcome") == "hang":
            out["stacks_tail"] = p.stderr[-6000:]
        out["rc"] = p.returncode
    except subprocess.TimeoutExpired:
        out = {"outcome": "killed", "rc": None}
    out["wall_s"] = round(time.monotonic() - t, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--label", default="cpu")
    ap.add_argument("--timeout", type=float, default=200.0)
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("rest", nargs="*", help="after --: options for user_threads.py")
    a = ap.parse_args()
    result = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for mode, extra in (("unguarded", []), ("guarded", ["--guard"])):
        runs = []
        for i in range(a.runs):
            runs.append(one(a.rest + extra, a.timeout))
            print(f"{mode:9} {i + 1:2}/{a.runs} {runs[-1]['outcome']:6} {runs[-1]['wall_s']:6.1f}s", flush=True)
        result[mode] = {"runs": len(runs), "outcomes": {k: sum(r["outcome"] == k for r in runs)
                                                        for k in sorted({r["outcome"] for r in runs})},
                        "completed": sum(r["outcome"] == "ok" for r in runs),
                        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 1) if runs else None,
                        "detail": runs}
    if not a.no_throughput:
        tp = one(a.rest + ["--guard", "--throughput"], a.timeout)
        result["throughput"] = tp
        print("throughput", json.dumps(tp.get("throughput")), flush=True)
    out = ROOT / "results" / f"guard_user_{a.label}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"unguarded {result['unguarded']['outcomes']}  guarded {result['guarded']['outcomes']} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
