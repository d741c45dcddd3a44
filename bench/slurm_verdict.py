"""Time from a Slurm job's end, as slurmctld records it (its log's `_job_complete: JobId=N done` line, with
milliseconds), to `dfdoctor launch`'s verdict (the report's `verdict` timeline entry). Goal: under 2 s.

Also `check` on an allocation (`--slurm-nodes 1`: one srun over the nodes) against `check` on this node alone.

Run as root on a machine where tests/infra/slurm.sh has started the cluster:
    .venv/bin/python bench/slurm_verdict.py [RUNS]  -> bench/results/slurm_verdict.json
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CTLD_LOG = Path("/var/lib/dfdoctor-slurm/slurmctld.log")
CASES = {
    "completed": "echo done",
    "failed (traceback)": "python3 -c 'raise ValueError(1)'",
    "oom-killed": "python3 -c 'x = bytearray(400 << 20); import time; time.sleep(2)'",
    "step-failed": "srun python3 -c 'import sys; sys.exit(3)'; exit 0",
}


def completed_at(job: str, timeout: float = 30) -> float:
    """When slurmctld recorded the job's end (epoch seconds, from its log)."""
    pat = re.compile(r"^\[(\S+)\] _job_complete: JobId=" + job + r" done")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for line in CTLD_LOG.read_text(errors="replace").splitlines()[-4000:]:
            m = pat.match(line)
            if m:
                return dt.datetime.fromisoformat(m[1]).timestamp()
        time.sleep(0.2)
    raise RuntimeError(f"no _job_complete line for job {job}")


def one(tmp: Path, case: str, body: str) -> dict:
    out = tmp / "r.json"
    mem = ["--mem=100M"] if case == "oom-killed" else []
    subprocess.run([sys.executable, "-m", "dfdoctor", "launch", "--no-check", "--format", "json", "--output",
                    str(out), "--", "sbatch", *mem, "-o", "o-%j.log", "--wrap", body], cwd=tmp,
                   capture_output=True, timeout=120)
    doc = json.loads(out.read_text())
    job = doc["run"]["slurm"]["job_id"]
    verdict_t = next(e["t"] for e in doc["timeline"] if e["event"] == "verdict")
    return {"case": case, "job": job, "cause": doc["verdict"]["cause"], "state": doc["verdict"]["state"],
            "end_to_verdict_s": round(verdict_t - completed_at(job), 3)}


def check_time(tmp: Path, extra: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "dfdoctor", "check", *extra, "--format", "json", "--output",
                    str(tmp / "c.json"), "--", "python3", "-c", "print(1)"], cwd=tmp, capture_output=True,
                   timeout=600)
    return round(time.monotonic() - t0, 3)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for _ in range(runs):
            for case, body in CASES.items():
                rows.append(one(tmp, case, body))
        single = [check_time(tmp, []) for _ in range(runs)]
        nodes = [check_time(tmp, ["--slurm-nodes", "1"]) for _ in range(runs)]
    lat = [r["end_to_verdict_s"] for r in rows]
    result = {"command": f"python bench/slurm_verdict.py {runs}", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": "shared 2-core VM, Slurm 22.05.8 single node (tests/infra/slurm.sh)",
              "end_to_verdict_s": {"median": statistics.median(lat), "max": max(lat), "runs": rows},
              "check_one_node_s": {"median": statistics.median(single), "all": single},
              "check_allocation_1_node_s": {"median": statistics.median(nodes), "all": nodes}}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "slurm_verdict.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "end_to_verdict_s"} |
                     {"end_to_verdict_median_s": result["end_to_verdict_s"]["median"],
                      "end_to_verdict_max_s": result["end_to_verdict_s"]["max"]}, indent=1))


if __name__ == "__main__":
    main()
