"""CPU of the dfdoctor commands the test suite starts most (launch 419 times, check 446, status 118 in round 14's
run), in two checkouts side by side, alternated (a loaded machine slows both alike). CPU is the process's and its
waited-for children's (getrusage): a launch's detached recorder and its job are not in it. Each checkout needs its
own .venv (`make venv`), compiled sources and, for AFTER, the kept templates (`make test`'s PRECOMPILE line).

    python3 bench/launch_status_cpu.py BEFORE_TREE AFTER_TREE [RUNS]
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = ["python3", "-c", "import time; print('step 1', flush=True); time.sleep(1)"]


def _cpu(argv: list[str], cwd: Path, env: dict) -> tuple[float, str]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), out.stdout


def main(argv: list[str]) -> int:
    trees = {"before": Path(argv[0]).resolve(), "after": Path(argv[1]).resolve()}
    runs = int(argv[2]) if len(argv) > 2 else 8
    scratch = Path(tempfile.mkdtemp(prefix="dfd-launch-cpu-"))
    res: dict[tuple[str, str], list[float]] = {}
    try:
        for i in range(runs):
            order = list(trees.items()) if i % 2 else list(reversed(trees.items()))
            for name, tree in order:
                work = scratch / name
                work.mkdir(exist_ok=True)
                env = dict(os.environ, NO_COLOR="1", XDG_STATE_HOME=str(scratch / f"state-{name}"),
                           XDG_CACHE_HOME=str(scratch / f"cache-{name}"), PATH="/usr/local/bin:/usr/bin:/bin")
                dfd = str(tree / ".venv" / "bin" / "dfdoctor")
                cpu, out = _cpu([dfd, "launch", "--no-check", "--watch", "5", "--format", "json", "--", *JOB],
                                work, env)
                res.setdefault((name, "launch --no-check"), []).append(cpu)
                run_id = json.loads(out)["run"]["id"]
                cpu, _ = _cpu([dfd, "status", run_id], work, env)
                res.setdefault((name, "status RUN"), []).append(cpu)
                cpu, _ = _cpu([dfd, "check", "--", "python3", "-c", "pass"], work, env)
                res.setdefault((name, "check -- python3 -c pass"), []).append(cpu)
                cpu, _ = _cpu([dfd, "--version"], work, env)
                res.setdefault((name, "--version"), []).append(cpu)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for case in dict.fromkeys(c for _, c in res):
        b, a = res[("before", case)], res[("after", case)]
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{case:28s} n={len(b):2d} median CPU s before {mb:.3f} after {ma:.3f} ratio {ma / mb:.2f} "
              f"(saved {mb - ma:+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
