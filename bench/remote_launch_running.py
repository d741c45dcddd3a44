"""How long `dfdoctor launch --target pct://...` takes to say "running", for two versions of dfdoctor side by side
(rounds alternate, same machine, same moment, so the ratio survives a noisy machine).

Each version is a package tree built from a git revision (`git archive`: doctor/ as dfdoctor/, with checks/,
trainer/ and templates/ in it, as a wheel lays it out) and run as `python -m dfdoctor` with it first on
PYTHONPATH. The job, in container 200, prints a line every 0.1 s until a stop file appears; the pre-launch checks
are skipped, so the time is the shipping, the start there and the watch until the verdict is certain.

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/remote_launch_running.py --before REV [--after REV] [--rounds 5]
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
import uuid
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
INFRA_ENV = Path("/var/lib/dfdoctor-infra/env")
JOB = ("import os, time\nhere = os.path.dirname(os.path.abspath(__file__))\nfor i in range(600):\n"
       "    print('step', i, flush=True)\n    if os.path.exists(os.path.join(here, 'stop')):\n        break\n"
       "    time.sleep(0.1)\n")


def tree(rev: str, into: Path) -> Path:
    """The package tree of revision `rev` (the work tree's files when rev is `.`) under `into`; the folder to
    put on PYTHONPATH."""
    src = into / "src"
    src.mkdir(parents=True)
    if rev == ".":
        for name in ("doctor", "checks", "trainer", "templates"):
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "doctor", "checks", "trainer", "templates"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = into / "path" / "dfdoctor"
    shutil.copytree(src / "doctor", pkg, symlinks=True)
    for name in ("checks", "trainer", "templates"):
        shutil.copytree(src / name, pkg / name, symlinks=True)
    return into / "path"


def infra_settings() -> dict[str, str]:
    """The test infrastructure's settings (tests/infra/provision.sh writes them)."""
    return dict(line.split("=", 1) for line in INFRA_ENV.read_text().splitlines() if "=" in line)


def versions_cli(doc: str, runs: int) -> tuple[argparse.Namespace, dict[str, str]]:
    """A side-by-side bench's command line: --version NAME=REV (repeated; before=main and after=. by default),
    --runs, --out; the arguments and the versions by name."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--version", action="append", help="NAME=REV (REV `.` is the work tree)")
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    return args, dict(v.split("=", 1) for v in (args.version or ["before=main", "after=."]))


def compiled_trees(revs: dict[str, str], tmp: Path) -> dict[str, Path]:
    """Each version's package tree (`tree`) under `tmp`, compiled once here (every launch would compile it again:
    the benches run it with PYTHONDONTWRITEBYTECODE)."""
    paths = {n: tree(r, Path(tmp) / f"tree-{n}") for n, r in revs.items()}
    for p in paths.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(p)], check=True, stdout=subprocess.DEVNULL)
    return paths


def in_turns(paths: dict[str, Path], i: int) -> list[tuple[str, Path]]:
    """The versions in the order of round `i`: each goes first in turn, so that none always meets the same drift."""
    order = list(paths.items())
    return order[i % len(order):] + order[:i % len(order)]


def pct_target(infra: dict[str, str]) -> str:
    """The test infrastructure's container as a pct:// target."""
    return f"pct://root@127.0.0.1:{infra['DFDOCTOR_INFRA_SSH_PORT']}/{infra['DFDOCTOR_INFRA_VMID']}"


def write_result(out: dict, where: Optional[Path]) -> None:
    """Print a bench's result and keep it in `where` when given."""
    text = json.dumps(out, indent=1)
    print(text)
    if where:
        where.write_text(text + "\n")


def one(path: Path, target: str, inside: str, host_side: Path, env: dict) -> float:
    """Launch the job once with the dfdoctor at `path`; seconds until `launch` returned with state running."""
    run_env = dict(env, PYTHONPATH=str(path), PYTHONDONTWRITEBYTECODE="1")
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "dfdoctor", "launch", "--no-check", "--target", target, "--cwd", inside,
                        "--log", f"{inside}/train.log", "--format", "json", "--", "python3", f"{inside}/train.py"],
                       capture_output=True, text=True, env=run_env, timeout=120, cwd=str(host_side.parent))
    took = time.monotonic() - start
    state = json.loads(p.stdout)["verdict"]["state"] if p.stdout.strip() else None
    (host_side / "stop").touch()
    time.sleep(1.0)
    if state != "running":
        raise SystemExit(f"not running ({state}): {p.stderr[-1000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    infra = infra_settings()
    target = pct_target(infra)
    rootfs = Path("/var/lib/lxc") / infra["DFDOCTOR_INFRA_VMID"] / "rootfs"
    env = dict(os.environ, DFDOCTOR_SSH_CONFIG=infra["DFDOCTOR_SSH_CONFIG"])
    with tempfile.TemporaryDirectory(prefix="dfd-bench-") as tmp:
        env["XDG_CACHE_HOME"] = f"{tmp}/cache"
        paths = {"before": tree(args.before, Path(tmp, "before")), "after": tree(args.after, Path(tmp, "after"))}
        times: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(args.rounds):
            for name, path in paths.items():
                inside = f"/tmp/dfd-bench-{uuid.uuid4().hex[:8]}"
                host_side = rootfs / inside.lstrip("/")
                host_side.mkdir(parents=True)
                (host_side / "train.py").write_text(JOB)
                try:
                    times[name].append(one(path, target, inside, host_side, env))
                finally:
                    shutil.rmtree(host_side, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"rounds": args.rounds, "median_s": {k: round(v, 2) for k, v in med.items()},
                      "all_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
                      "after_over_before": round(med["after"] / med["before"], 3),
                      "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
