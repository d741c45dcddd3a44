"""How fast `dfdoctor launch` gives its verdict after a job dies, and what the recorder costs while one runs.

Part 1: a job that logs, then dies at a moment it writes down itself (time.time() just before os._exit);
we read `dfdoctor launch`'s stdout and take the moment its verdict line arrives. Latency = that moment minus
the death. Repeated --runs times (≥ 20); median, p90 and max. The post-launch checks run as usual (they are
part of what the user waits for); the pre-launch checks are skipped (--no-check): they run before the job.

Part 2: a job that logs 5 lines a second for --duration seconds; every second we sample the recorder's CPU
time and resident memory from /proc. CPU share = recorder CPU seconds / wall seconds.

Usage: .venv/bin/python bench/verdict_latency.py --runs 20 --duration 60 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
DFDOCTOR = str(BIN / "dfdoctor")
DYING_JOB = """
import os, sys, time
print("step 0", flush=True)
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], "w") as f:
    f.write(repr(time.time()))
os._exit(1)
"""
LOGGING_JOB = """
import sys, time
end = time.time() + float(sys.argv[1])
i = 0
while time.time() < end:
    print(f"step {i} loss {1 / (i + 1):.5f}", flush=True)
    i += 1
    time.sleep(0.2)
"""


def env() -> dict[str, str]:
    """The environment for dfdoctor: no colour codes in the text we parse."""
    e = dict(os.environ)
    e["NO_COLOR"] = "1"
    return e


def one_death(work: Path, i: int) -> float:
    """Launch a job that dies after a moment; return seconds from its death to the verdict line."""
    job = work / "dying.py"
    stamp = work / f"death-{i}"
    delay = 0.4 + (i % 5) * 0.15  # deaths at different phases of the recorder's 1 s heartbeat
    proc = subprocess.Popen([DFDOCTOR, "launch", "--no-check", "--cwd", str(work), "--log", str(work / "t.log"),
                             "--watch", "30", "--", sys.executable, str(job), str(stamp), str(delay)],
                            stdout=subprocess.PIPE, text=True, env=env())
    printed = None
    for line in proc.stdout:
        if line.startswith("dfdoctor launch:") and printed is None:
            printed = time.time()
    proc.wait(timeout=60)
    died = float(stamp.read_text())
    return printed - died


def recorder_cost(work: Path, duration: float) -> dict:
    """Recorder CPU share and peak RSS while a job logs for `duration` seconds."""
    job = work / "logging.py"
    run_dir = work / "cost-run"
    subprocess.run([DFDOCTOR, "launch", "--no-check", "--cwd", str(work), "--log", str(work / "cost.log"),
                    "--watch", "0", "--run-dir", str(run_dir), "--", sys.executable, str(job), str(duration)],
                   check=True, capture_output=True, env=env(), timeout=60)
    rec = next(json.loads(l) for l in (run_dir / "record.jsonl").read_text().splitlines()
               if '"recorder"' in l)
    pid = rec["pid"]
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")

    def sample():
        """The recorder's CPU seconds and resident bytes now."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick, int(fields[21]) * page

    t0, (cpu0, rss) = time.monotonic(), sample()
    peak = rss
    cpu = cpu0
    try:
        while time.monotonic() - t0 < duration - 1:
            time.sleep(1)
            cpu, rss = sample()
            peak = max(peak, rss)
    except (OSError, IndexError):
        pass
    wall = time.monotonic() - t0
    os.kill(pid, signal.SIGTERM)  # ends the job too (passed on), in case it outlives the sampling
    return {"duration_s": round(wall, 1), "cpu_s": round(cpu - cpu0, 3),
            "cpu_percent_of_one_core": round(100 * (cpu - cpu0) / wall, 3), "peak_rss_mib": round(peak / 2**20, 1),
            "log_lines": sum(1 for _ in open(work / "cost.log"))}


def main() -> int:
    """Run both parts, print the figures, exit 1 when a goal is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dfdoctor-bench-") as tmp:
        work = Path(tmp)
        (work / "dying.py").write_text(DYING_JOB)
        (work / "logging.py").write_text(LOGGING_JOB)
        lat = []
        for i in range(args.runs):
            lat.append(one_death(work, i))
            print(f"run {i + 1:2d}: verdict {lat[-1]:.3f} s after the death", flush=True)
        lat.sort()
        latency = {"runs": len(lat), "median_s": round(statistics.median(lat), 3),
                   "p90_s": round(lat[int(0.9 * (len(lat) - 1))], 3), "min_s": round(lat[0], 3),
                   "max_s": round(lat[-1], 3), "goal_median_s": 1.0}
        print("verdict latency:", json.dumps(latency))
        cost = recorder_cost(work, args.duration)
        cost.update(goal_cpu_percent=1.0, goal_rss_mib=30)
        print("recorder cost:", json.dumps(cost))
    if args.json:
        Path(args.json).write_text(json.dumps({"latency": latency, "recorder": cost}, indent=1))
    ok = latency["median_s"] <= 1.0 and cost["cpu_percent_of_one_core"] < 1.0 and cost["peak_rss_mib"] < 30
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
