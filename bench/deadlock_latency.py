"""How long after the compile-lock cycle forms does `dfdoctor launch` name compile-deadlock?

Starts `dfdoctor launch --no-check --watch WATCH -- JOB...`, finds the job's process, and samples its stacks with
py-spy every second on its own (dfdoctor.diagnose.stackclass.find_cycle): the first sample showing the cycle
dates its forming (to within a second and one dump). Then waits for launch's verdict and kills the job.

    python3 bench/deadlock_latency.py --out bench/results/deadlock_latency_h200.json -- python3 bench/issue12_flex.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from dfdoctor.diagnose import stackclass, stacks

QUALIFIED = re.compile(r"^(\s+)(?:[\w<>]+\.)+([\w<>]+ \()", re.M)  # py-spy's ConvertFrame.__call__ -> __call__


def find_job(launcher: psutil.Process, marker: str) -> psutil.Process | None:
    """The job's process: a Python process whose command line holds the marker (not the launch itself)."""
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if marker in cmd and "dfdoctor" not in cmd and "deadlock_latency" not in cmd and p.pid != launcher.pid:
            return p
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--watch", type=float, default=300)
    ap.add_argument("job", nargs="+")
    a = ap.parse_args()
    a.job = [str(Path(w).resolve()) if os.path.exists(w) else w for w in a.job]  # launch runs in its own folder
    work = Path(tempfile.mkdtemp(prefix="latency-"))
    report = work / "launch.json"
    t0 = time.time()
    launch = subprocess.Popen([sys.executable, "-m", "dfdoctor", "launch", "--no-check", "--cwd", str(work),
                               "--watch", str(a.watch), "--format", "json", "--output", str(report),
                               "--format", "text", "--", *a.job], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=os.getcwd())
    marker = Path(a.job[-1]).name
    job, first_cycle, samples = None, None, 0
    while launch.poll() is None:
        if job is None:
            job = find_job(psutil.Process(launch.pid), marker)
        elif first_cycle is None:
            text = stacks.dump(job.pid, timeout=10).text
            samples += 1
            if stackclass.find_cycle(text) or stackclass.find_cycle(QUALIFIED.sub(r"\1\2", text)):
                first_cycle = time.time()
        time.sleep(1.0)
    verdict_at = time.time()
    out_text = launch.stdout.read()
    rep = json.loads(report.read_text()) if report.exists() else {}
    if job is not None:
        try:
            os.killpg(os.getpgid(job.pid), signal.SIGKILL)
        except OSError:
            pass
    result = {"command": " ".join(["python3", *sys.argv]), "job": a.job,
              "verdict": (rep.get("verdict") or {}).get("cause"), "summary": (rep.get("verdict") or {}).get("summary"),
              "evidence_head": ((rep.get("verdict") or {}).get("evidence") or [])[:6],
              "launch_s": round(verdict_at - t0, 1),
              "cycle_formed_s": round(first_cycle - t0, 1) if first_cycle else None,
              "cycle_to_verdict_s": round(verdict_at - first_cycle, 1) if first_cycle else None,
              "own_samples": samples, "launch_output_tail": out_text[-3000:]}
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("verdict", "launch_s", "cycle_formed_s", "cycle_to_verdict_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
