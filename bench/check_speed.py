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

- `DFDOCTOR_PROBE_SERVER=0 dfdoctor check -- python train.py`: the full check with every probe in a fresh
  interpreter (before the probe server: each torch-importing probe imported torch again).

It prints medians of wall time and of CPU time (user + system of the command and everything it waited for),
each as a ratio to the baseline's, and writes JSON. Goals: the full check within 1.1x the wall and 1.3x the CPU
of `import torch`.

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
GOAL = 1.1  # wall
CPU_GOAL = 1.3
FULL = "dfdoctor check -- python train.py"
FRESH = "DFDOCTOR_PROBE_SERVER=0 dfdoctor check -- python train.py"
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
        FULL: [*cli, "check", "--cwd", str(proj), "--", python, "train.py"],
        FRESH: ["env", "DFDOCTOR_PROBE_SERVER=0", *cli, "check", "--cwd", str(proj), "--", python, "train.py"],
        "dfdoctor check --only imports.smoke -- python train.py": [*cli, "check", "--cwd", str(proj), "--only",
                                                                   "imports.smoke", "--", python, "train.py"],
        "python -m torch.utils.collect_env": [python, "-m", "torch.utils.collect_env"],
        # where the time goes: every check but the other torch-importing one, and the no-torch fixed cost
        "dfdoctor check --skip cuda.init -- python train.py": [*cli, "check", "--cwd", str(proj), "--skip",
                                                               "cuda.init", "--", python, "train.py"],
        "dfdoctor check --only deps.requirements -- python train.py": [*cli, "check", "--cwd", str(proj), "--only",
                                                                       "deps.requirements", "--", python, "train.py"],
    }


def timed(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system of the command and all it waited for) and exit status of one
    run (output discarded, 300 s cap)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.005)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, proc.returncode


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
        cpus: dict[str, list[float]] = {k: [] for k in names}
        codes: dict[str, list[int]] = {k: [] for k in names}
        for rnd in range(rounds + 1):
            order = names[rnd % len(names):] + names[:rnd % len(names)]  # rotate who goes first
            for name in order:
                secs, cpu, rc = timed(cmds[name], proj)
                if rnd:  # round 0 warms the page cache; discarded
                    times[name].append(round(secs, 3))
                    cpus[name].append(round(cpu, 3))
                    codes[name].append(rc)
    base = statistics.median(times[names[0]])
    base_cpu = statistics.median(cpus[names[0]])
    rows = {name: {"median_s": round(statistics.median(ts), 3), "min_s": min(ts), "max_s": max(ts), "runs_s": ts,
                   "cpu_median_s": round(statistics.median(cpus[name]), 3), "cpu_runs_s": cpus[name],
                   "exit_codes": codes[name], "ratio_to_baseline": round(statistics.median(ts) / base, 3),
                   "cpu_ratio_to_baseline": round(statistics.median(cpus[name]) / base_cpu, 3)}
            for name, ts in times.items()}
    full, full_cpu = rows[FULL]["ratio_to_baseline"], rows[FULL]["cpu_ratio_to_baseline"]
    met = full <= GOAL and full_cpu <= CPU_GOAL
    result = {"rounds": rounds, "python": args.python, "host": os.uname().nodename, "cpus": os.cpu_count(),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "goal_ratio": GOAL,
              "cpu_goal_ratio": CPU_GOAL, "meets_goal": met, "commands": cmds, "results": rows}
    width = max(len(n) for n in names)
    print(f"{'command':<{width}}  wall     min      max      ratio   cpu      ratio   exit codes")
    for name, r in rows.items():
        print(f"{name:<{width}}  {r['median_s']:6.2f}s  {r['min_s']:6.2f}s  {r['max_s']:6.2f}s  "
              f"{r['ratio_to_baseline']:5.2f}x  {r['cpu_median_s']:6.2f}s  {r['cpu_ratio_to_baseline']:5.2f}x  "
              f"{sorted(set(r['exit_codes']))}")
    print(f"goal: dfdoctor check within {GOAL}x wall and {CPU_GOAL}x CPU of import torch -> "
          f"{'met' if met else 'NOT met'} ({full:.2f}x wall, {full_cpu:.2f}x CPU)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
