"""Does the guard hold, and never hang, in the DFlash pipeline shape? Runs bench/guard_pipeline.py in fresh
processes: N times with dfdoctor.guard, a few times with no guard (does the scenario race?), and a few times
with the round-4 guard (commit --old, its whole-step gate: does it hang?). Writes
bench/results/guard_pipeline_<label>.json.

    .venv/bin/python bench/guard_pipeline_runs.py --runs 20 --label cpu
    python3 bench/guard_pipeline_runs.py --runs 5 --label h200 -- --device cuda --model flex
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SCRIPT = ROOT / "guard_pipeline.py"
OLD_GUARD_COMMIT = "0f3dc1c"  # round 4's last commit: the whole-step shared/exclusive gate


def one(extra: list[str], timeout: float) -> dict:
    """One process; its JSON answer, or what happened when it gave none."""
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, str(SCRIPT), *extra], capture_output=True, text=True, timeout=timeout)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        out = json.loads(lines[-1]) if lines else {"outcome": "broken", "stderr": p.stderr[-1500:]}
        if out.get("outcome") == "hang":
            out["stacks_tail"] = p.stderr[-3000:]
        out["rc"] = p.returncode
    except subprocess.TimeoutExpired:
        out = {"outcome": "killed", "rc": None}
    out["wall_s"] = round(time.monotonic() - t, 2)
    return out


def old_guard(commit: str) -> str:
    """The round-4 guard module, written to a temporary file (empty when git cannot show it here)."""
    p = subprocess.run(["git", "show", f"{commit}:doctor/guard.py"], capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        return ""
    f = tempfile.NamedTemporaryFile("w", suffix="_round4_guard.py", delete=False)
    f.write(p.stdout)
    f.close()
    return f.name


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--compare-runs", type=int, default=3, help="runs without a guard and with the old guard")
    ap.add_argument("--label", default="cpu")
    ap.add_argument("--timeout", type=float, default=150.0)
    ap.add_argument("--deadline", type=float, default=60.0, help="a run's own deadline (hang: stacks, exit 3)")
    ap.add_argument("--old", default=OLD_GUARD_COMMIT)
    ap.add_argument("rest", nargs="*", help="after --: options for guard_pipeline.py")
    a = ap.parse_args()
    result = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    old = old_guard(a.old)
    modes = [("guarded", [], a.runs), ("unguarded", ["--no-guard"], a.compare_runs)]
    if old:
        modes.append(("round4_guard", ["--guard-file", old], a.compare_runs))
    base = a.rest + ["--deadline", str(a.deadline)]
    for mode, extra, n in modes:
        runs = []
        for i in range(n):
            runs.append(one(base + extra, a.timeout))
            print(f"{mode:12} {i + 1:2}/{n} {runs[-1]['outcome']:6} {runs[-1]['wall_s']:6.1f}s", flush=True)
        result[mode] = {"runs": len(runs), "outcomes": {k: sum(r["outcome"] == k for r in runs)
                                                        for k in sorted({r["outcome"] for r in runs})},
                        "completed": sum(r["outcome"] == "ok" for r in runs),
                        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 1) if runs else None,
                        "detail": runs}
    if old:
        Path(old).unlink()
    out = ROOT / "results" / f"guard_pipeline_{a.label}.json"
    out.write_text(json.dumps(result, indent=1))
    print(" ".join(f"{m} {result[m]['outcomes']}" for m, _, _ in modes), "->", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
