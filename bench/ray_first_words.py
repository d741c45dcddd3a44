"""Issue 42, point 4: for each Ray cause, the time from the submission to dfdoctor's verdict, against the time Ray
itself first says it (its job API's status or error_type, or its own words in the driver's log), on a real head.

    .venv/bin/python bench/ray_first_words.py [--out bench/results/ray_first_words.json]
    .venv/bin/python bench/ray_first_words.py --version before=main --version after=. --repeat 5 missing-module

With --version NAME=REV (issue 45: side by side, in one run), each launch runs the package tree of that revision
(bench/remote_launch_running.py's `tree`) as `python -m dfdoctor`, the versions taking turns on one head, and the
result gives each version's ratios (dfdoctor_s / ray_s per launch) and their median; without it, the work tree's
installed `dfdoctor`.

A thread polls the job API every 0.2 s while `dfdoctor launch` watches the same job (the line carries
`--submission-id`, which dfdoctor keeps). "never" means Ray had not said it when the job ended or 180 s after the
submission; the job is then stopped through its stop endpoint."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
from support import ray_head  # noqa: E402
from remote_launch_running import tree  # noqa: E402  (a revision's package tree)

JOBS = REPO / "tests" / "jobs"
RAY_LIMIT_S = 180.0
AFTER_SAID_S = 20.0  # once Ray said it, how long to wait more for the job's final status (ray_ended_s)
# case -> (job file, extra submit options, what counts as Ray's own word: (job API field test, driver log words))
CASES = {
    "ray-infeasible-resources": ("ray_gpu_task.py", [], "No available node types can fulfill"),
    "ray-pending-no-capacity": ("ray_no_capacity.py", [], "cannot be scheduled right now"),
    "ray-runtime-env-failed": ("ray_steps.py", ["--runtime-env-json", '{"pip": ["dfdoctor-no-such-package==0.0.1"]}'],
                               "RUNTIME_ENV_SETUP_FAILURE"),
    "missing-module": ("ray_missing_module.py", [], "No module named"),
    "ray-actor-died": ("ray_tasks_fail.py", [], None),
}


def _get(url: str, token: str):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})  # the head has token auth on
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def ray_first_word(address: str, token: str, job_id: str, words, out: dict, stop: threading.Event) -> None:
    """When Ray first says it: `words` in the job's message/error_type or in its driver's log."""
    t_end = time.time() + RAY_LIMIT_S + 60
    while not stop.is_set() and time.time() < t_end:
        try:
            job = _get(f"{address}/api/jobs/{job_id}", token)
            text = f"{job.get('error_type') or ''} {job.get('message') or ''}"
            if job.get("status") in ("FAILED", "SUCCEEDED", "STOPPED"):
                text += " " + _get(f"{address}/api/jobs/{job_id}/logs", token).get("logs", "")
                out.setdefault("ended", time.time())
            elif job.get("status") == "RUNNING":
                text += " " + _get(f"{address}/api/jobs/{job_id}/logs", token).get("logs", "")
            if words and words in text and "said" not in out:
                out["said"] = time.time()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise  # a watcher that cannot read Ray would report "never"
        except OSError:
            pass
        if "ended" in out or ("said" in out and time.time() > out["said"] + AFTER_SAID_S):
            return
        time.sleep(0.2)


def one(head, case: str, work: Path, version: tuple[str, Path] = None) -> dict:
    job_file, extra, words = CASES[case]
    wd = Path(tempfile.mkdtemp(prefix=case, dir=work))
    shutil.copy(JOBS / job_file, wd / job_file)
    job_id = f"bench-{case}-{time.time_ns()}"
    seen: dict = {}
    stop = threading.Event()
    token = (head.home / ".ray" / "auth_token").read_text().strip()
    watcher = threading.Thread(target=ray_first_word, args=(head.address, token, job_id, words, seen, stop))
    watcher.start()
    # (--skip ray.requirements: the pre-check would name a pin no index has before the submission; this measures
    # the watch)
    dfdoctor, env = [str(REPO / ".venv/bin/dfdoctor")], head.env
    if version is not None:  # the revision's tree first on the path, run by this interpreter
        dfdoctor, env = [sys.executable, "-m", "dfdoctor"], dict(head.env, PYTHONPATH=str(version[1]))
    p = subprocess.run([*dfdoctor, "launch", "--watch", "300", "--format", "json",
                        "--skip", "ray.requirements", "--",
                        "ray", "job", "submit", "--address", head.address, "--working-dir", ".",
                        "--submission-id", job_id, *extra, "--", "python", job_file],
                       cwd=wd, env=env, capture_output=True, text=True, timeout=600)
    doc = json.loads(p.stdout)
    events = {e["event"]: e["t"] for e in doc["timeline"]}
    submitted, verdict_at = events.get("submitted"), events.get("verdict")
    watcher.join(timeout=RAY_LIMIT_S + 90)
    stop.set()
    subprocess.run([*dfdoctor, "stop", doc["run"]["id"]], cwd=wd, env=env, capture_output=True, timeout=120)
    row = {"case": case, **({"version": version[0]} if version else {}),
           "verdict": doc["verdict"]["cause"], "state": doc["verdict"]["state"],
           "dfdoctor_s": round(verdict_at - submitted, 2) if submitted and verdict_at else None,
           "ray_s": round(seen["said"] - submitted, 2) if "said" in seen and submitted else None,
           "ray_ended_s": round(seen["ended"] - submitted, 2) if "ended" in seen and submitted else None}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "ray_first_words.json"))
    ap.add_argument("--repeat", type=int, default=1, help="launches per case (one head for all)")
    ap.add_argument("--version", action="append", default=[], help="NAME=REV (REV `.` is the work tree)")
    ap.add_argument("cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the head is ended (finally) on a kill too
    work = Path(tempfile.mkdtemp(prefix="rayfw"))
    revs = dict(v.split("=", 1) for v in a.version)
    versions = [(n, tree(r, work / f"tree-{n}")) for n, r in revs.items()] or [None]
    t0 = time.monotonic()
    head = ray_head.start(REPO / ".venv" / "bin" / "python")
    started = time.monotonic() - t0
    try:  # the versions take turns, in an order that rotates: the machine's drift falls on each alike
        rows = [one(head, c, work, v) for i in range(a.repeat) for c in a.cases
                for v in versions[i % len(versions):] + versions[:i % len(versions)]]
    finally:
        head.end()
        shutil.rmtree(work, ignore_errors=True)
    ratios = [r["dfdoctor_s"] / r["ray_s"] for r in rows if r["dfdoctor_s"] is not None and r["ray_s"]]
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    by_version = {}
    for n in revs:
        mine = [r["dfdoctor_s"] / r["ray_s"] for r in rows if r.get("version") == n and r["dfdoctor_s"] is not None
                and r["ray_s"]]
        by_version[n] = {"ratios": [round(x, 3) for x in mine],
                         "median": round(statistics.median(mine), 3) if mine else None,
                         "max": round(max(mine), 3) if mine else None}
    Path(a.out).write_text(json.dumps({"commit": commit, "versions": revs, "head_start_s": round(started, 1),
                                       "rows": rows, "ratio_max": round(max(ratios), 2) if ratios else None,
                                       **({"by_version": by_version} if revs else {}),
                                       "load": open("/proc/loadavg").read().split()[:3]}, indent=1) + "\n")


if __name__ == "__main__":
    main()
