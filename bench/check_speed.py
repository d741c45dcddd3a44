"""How long `dfdoctor check -- python train.py` takes against what the job itself pays to import torch.

The script under test imports torch (and a local module), like any training script. Contenders, run in
interleaved rounds (each round runs every command once, in a rotating order, so drift, page-cache warm-up and
other load on a shared machine hit all of them alike), after one discarded warm-up round:

- baseline: `python -c "import torch"` with the same interpreter;
- `dfdoctor check -- python train.py` (every pre-launch check, as a user runs it);
- `dfdoctor check --only imports.smoke -- python train.py` (the torch-importing check alone);
- `python -m torch.utils.collect_env` (the tool people run today to describe an environment);
- for the breakdown: the full check without `cuda.init` (the other check that imports torch), and
  `--only deps.requirements` (dfdoctor's fixed cost plus a probe that does not import torch).

It prints medians and ratios to the baseline (our goal: the full check within 1.5x) and writes JSON.

    .venv/bin/python bench/check_speed.py --rounds 7 --out bench/results/check_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.5
TRAIN_PY = '''"""A drafter training script: imports torch at module level, trains in main()."""
import os
import torch
import model


def main():
    raise SystemExit("the benchmark must never run the body")


if __name__ == "__main__":
    main()
'''


def make_project(where: Path) -> Path:
    """A tiny project: train.py importing torch and a local module, plus a requirements file."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "train.py").write_text(TRAIN_PY)
    (where / "model.py").write_text("HIDDEN = 64\n")
    (where / "requirements.txt").write_text("torch>=2.4\n")
    return where


def commands(python: str, proj: Path) -> dict[str, list[str]]:
    """The contenders, by name; the first is the baseline."""
    dfdoctor = shutil.which("dfdoctor", path=str(Path(sys.executable).parent)) or shutil.which("dfdoctor")
    cli = [dfdoctor] if dfdoctor else [sys.executable, "-m", "dfdoctor"]
    return {
        "python -c 'import torch'": [python, "-c", "import torch"],
        "dfdoctor check -- python train.py": [*cli, "check", "--cwd", str(proj), "--", python, "train.py"],
        "dfdoctor check --only imports.smoke -- python train.py": [*cli, "check", "--cwd", str(proj), "--only",
                                                                   "imports.smoke", "--", python, "train.py"],
        "python -m torch.utils.collect_env": [python, "-m", "torch.utils.collect_env"],
        # where the time goes: every check but the other torch-importing one, and the no-torch fixed cost
        "dfdoctor check --skip cuda.init -- python train.py": [*cli, "check", "--cwd", str(proj), "--skip",
                                                               "cuda.init", "--", python, "train.py"],
        "dfdoctor check --only deps.requirements -- python train.py": [*cli, "check", "--cwd", str(proj), "--only",
                                                                       "deps.requirements", "--", python, "train.py"],
    }


def timed(argv: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and exit status of one run (output discarded, 300 s cap)."""
    t = time.perf_counter()
    try:
        rc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=300).returncode
    except subprocess.TimeoutExpired:
        rc = -1
    return time.perf_counter() - t, rc


def main() -> int:
    """Measure, print a table, write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds (at least 5); one warm-up is extra")
    ap.add_argument("--python", default=sys.executable, help="the training interpreter, with torch (default: this one)")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    with tempfile.TemporaryDirectory(prefix="dfdoctor-bench-") as tmp:
        proj = make_project(Path(tmp) / "proj")
        cmds = commands(args.python, proj)
        names = list(cmds)
        times: dict[str, list[float]] = {k: [] for k in names}
        codes: dict[str, list[int]] = {k: [] for k in names}
        for rnd in range(rounds + 1):
            order = names[rnd % len(names):] + names[:rnd % len(names)]  # rotate who goes first
            for name in order:
                secs, rc = timed(cmds[name], proj)
                if rnd:  # round 0 warms the page cache; discarded
                    times[name].append(round(secs, 3))
                    codes[name].append(rc)
    base = statistics.median(times[names[0]])
    rows = {name: {"median_s": round(statistics.median(ts), 3), "min_s": min(ts), "max_s": max(ts), "runs_s": ts,
                   "exit_codes": codes[name], "ratio_to_baseline": round(statistics.median(ts) / base, 3)}
            for name, ts in times.items()}
    full = rows["dfdoctor check -- python train.py"]["ratio_to_baseline"]
    result = {"rounds": rounds, "python": args.python, "host": os.uname().nodename, "cpus": os.cpu_count(),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "goal_ratio": GOAL,
              "meets_goal": full <= GOAL, "commands": cmds, "results": rows}
    width = max(len(n) for n in names)
    print(f"{'command':<{width}}  median   min      max      ratio   exit codes")
    for name, r in rows.items():
        print(f"{name:<{width}}  {r['median_s']:6.2f}s  {r['min_s']:6.2f}s  {r['max_s']:6.2f}s  "
              f"{r['ratio_to_baseline']:5.2f}x  {sorted(set(r['exit_codes']))}")
    print(f"goal: dfdoctor check within {GOAL}x of import torch -> {'met' if full <= GOAL else 'NOT met'} ({full:.2f}x)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
