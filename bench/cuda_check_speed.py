"""How long `dfdoctor check --only cuda.init` takes against the bare minimum a job pays to start CUDA.

Runs the commands below in alternating rounds (so drift and page-cache warm-up hit all alike), after one
discarded warm-up round, and reports medians and the ratio check / baseline. Needs a GPU.

    python bench/cuda_check_speed.py --rounds 5 --out bench/results/cuda_speed.json
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
# a real file: dfdoctor replaces its --output atomically, which must never be pointed at a device like /dev/null
SCRATCH = os.path.join(tempfile.gettempdir(), f"cuda-bench-report-{os.getpid()}.json")
BASELINE = "import torch; torch.cuda.init(); torch.ones(1, device='cuda')"


def commands(python: str) -> dict[str, list[str]]:
    """The contenders, by name."""
    dfdoctor = shutil.which("dfdoctor")
    cli = [dfdoctor] if dfdoctor else [sys.executable, "-m", "dfdoctor"]
    return {
        "baseline: python -c 'import torch; torch.cuda.init(); torch.ones(1, device=cuda)'": [python, "-c", BASELINE],
        "probe alone: cuda_init_probe.py": [python, str(ROOT / "checks/probes/cuda_init_probe.py")],
        "dfdoctor check --only cuda.init --require-gpu": [*cli, "check", "--python", python, "--only", "cuda.init",
                                                          "--require-gpu", "--format", "json", "--output", SCRATCH],
        "dfdoctor check --only 'cuda*' --require-gpu": [*cli, "check", "--python", python, "--only", "cuda*",
                                                        "--require-gpu", "--format", "json", "--output", SCRATCH],
    }


def _probe_out() -> str:
    """Where the bare probe writes its answer during the benchmark."""
    return os.path.join(tempfile.gettempdir(), f"cuda-bench-probe-{os.getpid()}.json")


def timed(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and exit status of one run (output discarded, 120 s cap)."""
    # the probe's answer goes to a scratch file (answer() renames a temp file onto it, so never a device path)
    env = dict(os.environ, DFDOCTOR_PROBE_OUT=_probe_out())
    t = time.perf_counter()
    try:
        rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=120).returncode
    except subprocess.TimeoutExpired:
        rc = -1
    return time.perf_counter() - t, rc


def main() -> int:
    """Measure, print a table, write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=sys.executable, help="the interpreter with torch (default: this one)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cmds = commands(args.python)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    codes: dict[str, list[int]] = {k: [] for k in cmds}
    for rnd in range(args.rounds + 1):
        for name, argv in cmds.items():
            secs, rc = timed(argv)
            if rnd:  # round 0 warms the page cache and the driver; discarded
                times[name].append(round(secs, 3))
                codes[name].append(rc)
    base = statistics.median(times[next(iter(cmds))])
    rows = {name: {"median_s": round(statistics.median(ts), 3), "min_s": min(ts), "max_s": max(ts), "runs_s": ts,
                   "exit_codes": codes[name], "ratio_to_baseline": round(statistics.median(ts) / base, 3)}
            for name, ts in times.items()}
    result = {"rounds": args.rounds, "python": args.python, "host": os.uname().nodename,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commands": {k: v for k, v in cmds.items()},
              "results": rows}
    for name, r in rows.items():
        print(f"{r['median_s']:7.3f} s  x{r['ratio_to_baseline']:.2f}  {name}  (rc {sorted(set(r['exit_codes']))})")
    for scratch in (SCRATCH, _probe_out()):
        if os.path.exists(scratch):
            os.unlink(scratch)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
