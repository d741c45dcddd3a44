"""CPU and wall of a local `dfdoctor check` and `dfdoctor launch`, side by side for two versions of dfdoctor, on a
job that does not import torch (`plain.py`) and on one that does (`train.py`, as bench/floor_ratios.py's `local`).

Each version's package tree is built as bench/remote_launch_running.py builds it (REV `.` is the work tree) and put
on PYTHONPATH; the training interpreter is this venv's python (a CPU-only torch here) for both. Rounds alternate
the versions' order; round 0 warms the caches and is not counted. CPU is RUSAGE_CHILDREN: the command and every
process it waited for (the probe server and its forks; a launched job that is detached is not in it).

    .venv/bin/python bench/check_cpu_versions.py --version before=main --version after=. --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_launch_running import tree  # noqa: E402

JOBS = {"plain": ("plain.py", "import helper\nprint('ok')\n"),
        "trainer": ("train.py", "import torch\nimport helper\nprint('ok', torch.__version__)\n")}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="append", required=True, help="NAME=REV (REV `.` is the work tree)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfdoctor-cpu-versions-"))
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "helper.py").write_text("x = 1\n")
    for name, text in JOBS.values():
        (proj / name).write_text(text)
    versions = {n: tree(rev, tmp / f"tree-{n}") for n, rev in (v.split("=", 1) for v in args.version)}
    got: dict[tuple, list] = {}
    for rnd in range(args.rounds + 1):
        order = list(versions.items())[::(1 if rnd % 2 else -1)]
        for cmd in ("check", "launch"):
            for job, (script, _) in JOBS.items():
                for name, path in order:
                    env = dict(os.environ, PYTHONPATH=str(path), XDG_CACHE_HOME=str(tmp / f"cache-{name}"))
                    c0, t0 = cpu(), time.monotonic()
                    p = subprocess.run([sys.executable, "-m", "dfdoctor", cmd, "--cwd", str(proj), "--", sys.executable,
                                        script], cwd=proj, env=env, capture_output=True, text=True, timeout=300)
                    wall, used = time.monotonic() - t0, cpu() - c0
                    if p.returncode != 0:
                        raise SystemExit(f"{name} {cmd} {job}: exit {p.returncode}\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
                    if rnd:
                        got.setdefault((cmd, job, name), []).append((wall, used))
        print(f"round {rnd}: load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'command':8} {'job':8} {'version':8} {'CPU-s':>6} {'wall-s':>6}  (medians; every round's CPU-s)")
    for (cmd, job, name), v in sorted(got.items()):
        print(f"{cmd:8} {job:8} {name:8} {statistics.median(c for _, c in v):6.3f} "
              f"{statistics.median(w for w, _ in v):6.2f}  " + " ".join(f"{c:.2f}" for _, c in v))


if __name__ == "__main__":
    main()
