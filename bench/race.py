"""Benchmark the compile-race reproduction and its fixes: how often, how fast, and what each fix costs.

Each run is one fresh process of checks/probes/compile_race_probe.py (the harness `compile.race` uses), killed
at its timeout. Prints a table and writes bench/results/race_<label>.json.

    .venv/bin/python bench/race.py --runs 20 --guard-runs 50            # the goal: >=95% in 20 s; 0 failures
    .venv/bin/python bench/race.py --backend inductor --threads 3 --runs 5 --guards none,exclusive-compile
    .venv/bin/python bench/race.py --trainer-cost --guards exclusive-compile,step-lock,eager-backward,off
        (what each guard costs the real trainer: warm step time, side by side, inductor cache warmed first)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dfdoctor.context import Context  # noqa: E402
from dfdoctor.probe import run_probe  # noqa: E402


def one_run(ctx: Context, guard: str, args: argparse.Namespace) -> dict:
    """One probe process; its answer plus wall time, or what happened when it gave none."""
    argv = ["--backend", args.backend, "--threads", str(args.threads), "--steps", str(args.steps),
            "--guard", guard, "--deadline", str(args.deadline)]
    t = time.monotonic()
    out = run_probe(ctx, "compile_race_probe.py", argv, timeout=args.deadline + 30)
    wall = time.monotonic() - t
    p = out.payload or {"outcome": "no-answer", "rc": out.returncode, "stderr": out.stderr[-500:]}
    return {"outcome": p["outcome"], "wall_s": round(wall, 2), "elapsed_s": p.get("elapsed_s"),
            "first_error_s": p.get("first_error_s"), "kinds": p.get("kinds", []),
            "warm_step_s": p.get("warm_step_s"), "torch": p.get("torch")}


def summarise(guard: str, runs: list[dict], limit_s: float) -> dict:
    """Counts and medians for one guard."""
    failed = [r for r in runs if r["outcome"] != "ok"]
    fast = [r for r in failed if r["outcome"] == "race" and r["wall_s"] <= limit_s]
    med = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    return {"guard": guard, "runs": len(runs), "failed": len(failed),
            "reproduced_within_limit": len(fast), "limit_s": limit_s,
            "outcomes": {o: sum(r["outcome"] == o for r in runs) for o in sorted({r["outcome"] for r in runs})},
            "kinds": sorted({k for r in runs for k in r["kinds"]}),
            "median_wall_s": med([r["wall_s"] for r in runs]),
            "median_first_error_s": med([r["first_error_s"] for r in runs if r["first_error_s"] is not None]),
            "median_warm_step_s": med([r["warm_step_s"] for r in runs if r["warm_step_s"]])}


def trainer_cost(args: argparse.Namespace) -> list[dict]:
    """Run the tiny trainer once per guard (after one warm-up run fills the compile cache); read its summary."""
    import subprocess
    import tempfile

    rows = []
    guards = args.guards.split(",")
    for guard in [guards[0]] + guards:  # the first run only warms inductor's cache, so compiles cost alike
        with tempfile.TemporaryDirectory() as out:
            t = time.monotonic()
            r = subprocess.run([args.python, "-m", "dfdoctor.trainer", "--compile-guard", guard, "--out", out,
                                "--steps", str(args.trainer_steps)], cwd=ROOT, capture_output=True, text=True,
                               timeout=900)
            wall = time.monotonic() - t
            res = json.loads((Path(out) / "summary.json").read_text()) if r.returncode == 0 else {}
        steps = [v["warm_step_ms"] for v in res.get("results", {}).values()]
        rows.append({"guard": guard, "rc": r.returncode, "wall_s": round(wall, 1),
                     "warm_step_ms": round(statistics.median(steps), 2) if steps else None,
                     "drafter_s": [v["seconds"] for v in res.get("results", {}).values()]})
        print(rows[-1], flush=True)
    return rows[1:]


def main() -> int:
    """Run the benchmark and write its results."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="the training interpreter")
    ap.add_argument("--backend", default="race", choices=("race", "inductor", "flex"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20, help="runs without a guard")
    ap.add_argument("--guard-runs", type=int, default=50, help="runs with each guard")
    ap.add_argument("--guards", default="none,exclusive-compile", help="comma-separated; 'none' = no guard")
    ap.add_argument("--deadline", type=float, default=60.0)
    ap.add_argument("--limit", type=float, default=20.0, help="'reproduced within' this many seconds (wall)")
    ap.add_argument("--label", default=time.strftime("%Y%m%d-%H%M%S"))
    ap.add_argument("--trainer-cost", action="store_true", help="time the real trainer under each guard")
    ap.add_argument("--trainer-steps", type=int, default=300)
    args = ap.parse_args()
    if args.trainer_cost:
        rows = trainer_cost(args)
        out = ROOT / "bench" / "results" / f"race_trainer_cost_{args.label}.json"
        out.write_text(json.dumps({"host": platform.node(), "command": " ".join(sys.argv), "rows": rows}, indent=1))
        print(f"wrote {out.relative_to(ROOT)}")
        return 0
    ctx = Context(python=args.python, cwd=ROOT)
    table = []
    for guard in args.guards.split(","):
        n = args.runs if guard == "none" else args.guard_runs
        runs = []
        for i in range(n):
            runs.append(one_run(ctx, guard, args))
            print(f"{guard:18} {i + 1:3}/{n} {runs[-1]['outcome']:8} {runs[-1]['wall_s']:6.2f}s", flush=True)
        table.append({**summarise(guard, runs, args.limit), "detail": runs})
    result = {"label": args.label, "host": platform.node(), "cpus": __import__("os").cpu_count(),
              "backend": args.backend, "threads": args.threads, "steps": args.steps,
              "torch": next((r["torch"] for t in table for r in t["detail"] if r["torch"]), None),
              "command": " ".join(sys.argv), "summary": table}
    out = ROOT / "bench" / "results" / f"race_{args.label}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"\n{'guard':18} {'runs':>4} {'failed':>6} {'<=limit':>7} {'med wall':>8} {'med 1st err':>11} kinds")
    for t in table:
        print(f"{t['guard']:18} {t['runs']:4} {t['failed']:6} {t['reproduced_within_limit']:7} "
              f"{t['median_wall_s']!s:>8} {t['median_first_error_s']!s:>11} {','.join(t['kinds'])}")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
