"""The own CPU of dfdoctor's commands (its own process only, as the suite's CPU meter counts it: not the checks'
forked workers, the probes, the recorder or the job) in two checkouts side by side, alternated round by round (a
loaded machine slows both alike): `check --only imports.smoke`, `check`, `launch` and `launch --no-check` of a job
printing a line every 0.5 s, `status`, `report` and `stop` of that run. Each checkout needs its own .venv and
compiled sources (`make test`'s PRECOMPILE line).

    python3 bench/command_cpu.py BEFORE_TREE AFTER_TREE [ROUNDS] [--json OUT]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from alternated import alternated

# runs `dfdoctor ARGS` and writes its own CPU-seconds (user + system of this process alone) at exit
_OWN = """
import atexit, os, resource, sys
out, me = sys.argv[1], os.getpid()
def own():
    if os.getpid() == me:
        r = resource.getrusage(resource.RUSAGE_SELF)
        with open(out, "w") as f:
            f.write(repr(r.ru_utime + r.ru_stime))
atexit.register(own)
sys.argv = ["dfdoctor"] + sys.argv[2:]
from dfdoctor.cli.main import entry
entry()
"""

JOB = "import time\nfor i in range(60):\n    print('step', i, flush=True)\n    time.sleep(0.5)\n"


def _own(tree: Path, work: Path, env: dict, *args: str) -> tuple[float, str]:
    mark = work / "own.txt"
    mark.unlink(missing_ok=True)
    p = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", _OWN, str(mark), *args], cwd=work, env=env,
                       capture_output=True, text=True, timeout=300)
    return float(mark.read_text()), p.stdout


def _round(tree: Path, work: Path, env: dict, res: dict) -> None:
    def note(case: str, *args: str) -> str:
        cpu, out = _own(tree, work, env, *args)
        res.setdefault(case, []).append(cpu)
        return out

    note("check --only imports.smoke", "check", "--only", "imports.smoke", "--", "python3", "-c", "pass")
    note("check", "check", "--", "python3", "-c", "pass")
    for case, extra in (("launch --no-check", ["--no-check"]), ("launch", [])):
        out = note(case, "launch", *extra, "--format", "json", "--", "python3", "-u", "job.py")
        run = json.loads(out)["run"]["id"]
        note("status", "status", run)
        note("report", "report", run, "-q")
        note("stop", "stop", run)


def main(argv: list[str]) -> int:
    out = argv[argv.index("--json") + 1] if "--json" in argv else None
    argv = [a for i, a in enumerate(argv) if a != "--json" and (i == 0 or argv[i - 1] != "--json")]
    trees = {"before": Path(argv[0]).resolve(), "after": Path(argv[1]).resolve()}
    rounds = int(argv[2]) if len(argv) > 2 else 5
    res, _ = alternated(trees, rounds, JOB, _round, "dfd-command-cpu-")
    rows = []
    for case in res["before"]:
        b, a = statistics.median(res["before"][case]), statistics.median(res["after"][case])
        rows.append({"command": case, "n": len(res["before"][case]), "before_cpu_s": round(b, 4),
                     "after_cpu_s": round(a, 4), "saved_ms": round(1000 * (b - a), 1), "ratio": round(a / b, 3)})
        print(f"{case:28s} n={rows[-1]['n']:2d} own CPU s median before {b:.3f} after {a:.3f} "
              f"saved {1000 * (b - a):+.0f} ms (ratio {a / b:.2f})")
    if out:
        Path(out).write_text(json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "rounds": rounds,
                                         "load": os.getloadavg(), "rows": rows, "samples": res}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
