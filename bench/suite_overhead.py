"""CPU the test suite spends on itself rather than on dfdoctor, in two checkouts side by side (alternated, so a loaded
machine slows both alike): what each xdist worker pays to collect the suite, the one collection `make test` runs
first to cache pytest's rewritten test files, test_structure.py's own CPU, and one torch-made data file of
test_lookalikes. CPU is the process's and its waited-for children's (getrusage). Each checkout needs its own
.venv (`make venv`) and compiled sources (`python -m compileall -q doctor checks trainer`).

    python3 bench/suite_overhead.py BEFORE_TREE AFTER_TREE [ROUNDS]

A worker's collection in BEFORE runs as CI's workers did: no rewritten test file cached (each of the six rewrote
all of them), under PYTHONDONTWRITEBYTECODE=1 as on our machines (without it, the six started together and all
rewrote them too). AFTER runs `make test`'s collection first (its CPU shown once: it is paid once, not per worker).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

COLLECT = ["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
TORCH_DATA = ("import torch; torch.manual_seed(0); torch.save({'x': torch.randn(64, 8), "
              "'y': torch.randint(0, 2, (64,))}, 'train.pt')")


def _cpu(argv: list[str], cwd: Path, env: dict) -> float:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {cwd} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def _rewritten(tree: Path) -> list[Path]:
    """pytest's cached rewritten test files (tests/**/__pycache__/*-pytest-*.pyc)."""
    return [p for p in (tree / "tests").rglob("*-pytest-*.pyc")]


def main(argv: list[str]) -> int:
    trees = {"before": Path(argv[0]).resolve(), "after": Path(argv[1]).resolve()}
    rounds = int(argv[2]) if len(argv) > 2 else 3
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    res: dict[tuple[str, str], list[float]] = {}

    def add(name: str, case: str, value: float) -> None:
        res.setdefault((name, case), []).append(value)

    for p in _rewritten(trees["before"]):
        p.unlink()  # CI's fresh clone has none
    for p in _rewritten(trees["after"]):
        p.unlink()
    py = {k: str(t / ".venv" / "bin" / "python") for k, t in trees.items()}
    add("after", "make test's one collection (cache written)",
        _cpu([py["after"], *COLLECT], trees["after"], dict(env, PYTHONDONTWRITEBYTECODE="")))
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"suite-overhead-{os.getpid()}"
    scratch.mkdir()
    try:
        for i in range(rounds):
            order = list(trees.items()) if i % 2 else list(reversed(trees.items()))
            for name, tree in order:
                add(name, "an xdist worker's collection", _cpu([py[name], *COLLECT], tree, env))
                add(name, "tests/test_structure.py (pytest -n 0)",
                    _cpu([py[name], "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                          "tests/test_structure.py"], tree, env))
            add("one", "torch-made data file (test_lookalikes: 6 before, 1 after)",
                _cpu([py["after"], "-c", TORCH_DATA], scratch, env))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for (name, case), values in res.items():
        print(f"{name:6s} {case:58s} n={len(values)} median CPU s {statistics.median(values):6.2f}  "
              f"({' '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
