"""CPU and wall time of dfdoctor's start-up in two checkouts, side by side (alternated, so a loaded machine slows
both alike): `import dfdoctor.cli.main`, `import dfdoctor.guard` (what a training process pays), `dfdoctor --help`
and `dfdoctor check -- python3 -c pass`. CPU is the process's and its waited-for children's (getrusage), which a
busy machine disturbs much less than wall time. Each checkout needs its own .venv (`make venv`).

    python3 bench/startup_cpu.py BEFORE_TREE AFTER_TREE [RUNS]
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time

CASES = {
    "import dfdoctor.cli.main": lambda t: [f"{t}/.venv/bin/python", "-c", "import dfdoctor.cli.main"],
    "import dfdoctor.guard": lambda t: [f"{t}/.venv/bin/python", "-c", "import dfdoctor.guard"],
    "dfdoctor --help": lambda t: [f"{t}/.venv/bin/dfdoctor", "--help"],
    "dfdoctor check -- python3 -c pass": lambda t: [f"{t}/.venv/bin/dfdoctor", "check", "--", "python3", "-c", "pass"],
}


def _cpu(argv: list[str], cwd: str) -> tuple[float, float]:
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, capture_output=True, cwd=cwd, timeout=300)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), time.perf_counter() - t0


def main(argv: list[str]) -> int:
    trees = {"before": argv[0], "after": argv[1]}
    runs = int(argv[2]) if len(argv) > 2 else 12
    work = tempfile.mkdtemp(prefix="dfd-startup-")
    res: dict[tuple[str, str], list[tuple[float, float]]] = {(k, c): [] for k in trees for c in CASES}
    for i in range(runs):
        for case, cmd in CASES.items():
            if case.startswith("dfdoctor check") and i >= max(3, runs // 3):
                continue  # seconds each: a third of the runs
            order = list(trees.items()) if i % 2 else list(reversed(trees.items()))
            for name, tree in order:
                res[(name, case)].append(_cpu(cmd(tree), work))
    for case in CASES:
        b, a = res[("before", case)], res[("after", case)]
        cb, ca = statistics.median(x[0] for x in b), statistics.median(x[0] for x in a)
        wb, wa = statistics.median(x[1] for x in b), statistics.median(x[1] for x in a)
        print(f"{case:36s} n={len(b):2d} CPU s before {cb:.3f} after {ca:.3f} ratio {ca / cb:.2f} | "
              f"wall s before {wb:.3f} after {wa:.3f} ratio {wa / wb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
