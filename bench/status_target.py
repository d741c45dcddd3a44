"""`dfdoctor status` of a run on a --target (ssh://, tests/infra's sshd: this machine), before and after, side by side in one run: the
cost of what the target's agent reads in its look (round 17: the named rendezvous variables, each Python
process's TCP connections, the job's and recorder's states, in the same session).

One job is launched there and left silent (three Python processes in torchrun's shape, two of them
with a rank's environment and a connection to the parent's listener, so their connections are read); rounds then alternate the versions' `status` of it (the
order rotates, so load on a shared machine hits both alike). Each version is a package tree of a git revision
(bench/remote_launch_running.py's `tree`), compiled once, run as `python -m dfdoctor` with it first on
PYTHONPATH. Every round's verdicts must agree (a speed change that changes what dfdoctor says is a regression).

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/status_target.py --before main [--after .] [--rounds 8] [--watch 3]
"""

from __future__ import annotations

import argparse
import compileall
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_launch_running import INFRA_ENV, tree  # noqa: E402  (the same package trees)

# silent, torchrun's shape: a parent listening as a rendezvous store would, two children with a rank's environment
# (RANK, LOCAL_RANK, MASTER_ADDR/MASTER_PORT) each holding a connection to it, so their connections are read;
# all end on a `stop` file beside the script
JOB = ("import os, socket, subprocess, sys, time\nhere = os.path.dirname(os.path.abspath(__file__))\n"
       "if sys.argv[1:2] == ['rank']:\n    c = socket.create_connection(('127.0.0.1', int(os.environ['MASTER_PORT'])))\n"
       "    while not os.path.exists(os.path.join(here, 'stop')):\n        time.sleep(0.2)\n    sys.exit(0)\n"
       "s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(4)\nport = str(s.getsockname()[1])\n"
       "kids = [subprocess.Popen([sys.executable, __file__, 'rank'], env=dict(os.environ, RANK=str(r), "
       "LOCAL_RANK=str(r), WORLD_SIZE='2', MASTER_ADDR='127.0.0.1', MASTER_PORT=port)) for r in (0, 1)]\n"
       "conns = [s.accept()[0] for k in kids]\nfor k in kids:\n    k.wait()\n")


def status(path: Path, local: Path, env: dict, watch: str) -> tuple[float, tuple]:
    """Seconds one `status` took, and its verdict (state, cause)."""
    began = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "dfdoctor", "status", "--watch", watch, "--format", "json"],
                       capture_output=True, text=True, env=dict(env, PYTHONPATH=str(path)), timeout=180, cwd=local)
    took = time.perf_counter() - began
    v = json.loads(p.stdout)["verdict"] if p.stdout.strip() else {}
    return took, (v.get("state"), v.get("cause"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--watch", default="3")
    args = ap.parse_args()
    infra = dict(line.split("=", 1) for line in INFRA_ENV.read_text().splitlines() if "=" in line)
    # ssh, not pct: the container has no network, not even loopback; this host's busy TCP tables are the dear case
    target = f"ssh://root@127.0.0.1:{infra['DFDOCTOR_INFRA_SSH_PORT']}"
    env = dict(os.environ, DFDOCTOR_SSH_CONFIG=infra["DFDOCTOR_SSH_CONFIG"], PYTHONDONTWRITEBYTECODE="1")
    inside = f"/tmp/dfd-bench-status-{uuid.uuid4().hex[:8]}"
    host_side = Path(inside)
    with tempfile.TemporaryDirectory(prefix="dfd-bench-") as tmp:
        env["XDG_CACHE_HOME"] = f"{tmp}/cache"
        paths = {"before": tree(args.before, Path(tmp, "before")), "after": tree(args.after, Path(tmp, "after"))}
        for path in paths.values():
            compileall.compile_dir(str(path), quiet=1)
        local = Path(tmp, "here")
        local.mkdir()
        host_side.mkdir(parents=True)
        (host_side / "job.py").write_text(JOB)
        times: dict[str, list[float]] = {k: [] for k in paths}
        verdicts: dict[str, set] = {k: set() for k in paths}
        try:
            p = subprocess.run([sys.executable, "-m", "dfdoctor", "launch", "--no-check", "--target", target,
                                "--cwd", inside, "--watch", "0", "--format", "json", "--", "python3",
                                f"{inside}/job.py"], capture_output=True, text=True,
                               env=dict(env, PYTHONPATH=str(paths["after"])), timeout=120, cwd=local)
            assert p.stdout.strip(), p.stderr
            time.sleep(2)  # its three processes are up
            names = list(paths)
            for r in range(args.rounds):
                for name in names[r % 2:] + names[:r % 2]:
                    took, verdict = status(paths[name], local, env, args.watch)
                    times[name].append(took)
                    verdicts[name].add(verdict)
        finally:
            (host_side / "stop").touch()
            time.sleep(1.5)
            shutil.rmtree(host_side, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"rounds": args.rounds, "watch": args.watch, "median_s": {k: round(v, 3) for k, v in med.items()},
                      "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
                      "verdicts": {k: sorted(map(list, v)) for k, v in verdicts.items()},
                      "after_over_before": round(med["after"] / med["before"], 3),
                      "paired_ratio_median": round(statistics.median(a / b for a, b in zip(times["after"],
                                                                                           times["before"])), 3),
                      "load": os.getloadavg()},
                     indent=1))


if __name__ == "__main__":
    main()
