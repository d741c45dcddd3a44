"""Only the recorder is killed (kill -9 on its pid) while the job runs and prints. The job must not die of
its broken output pipe, its output still reaches --log, and `status` names what happened: the recorder was
killed, not the job and its recorder by a session end or a hard kill of both."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from jobs.harness import dfdoctor, job_env, kill_runs

PRINTER = """
import time
for i in range(100000):
    print("step", i, flush=True)
    time.sleep(0.05)
"""


def _events(run_dir) -> list[dict]:
    return [json.loads(ln) for ln in (run_dir / "record.jsonl").read_text().splitlines() if ln.strip()]


def _wait(pred, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_killing_only_the_recorder_leaves_the_job_running_and_is_named(tmp_path):
    (tmp_path / "printer.py").write_text(PRINTER)
    log = tmp_path / "train.log"
    try:
        p = dfdoctor("launch", "--no-check", "--watch", "3", "--log", str(log), "--format", "json", "--",
                     sys.executable, "printer.py", cwd=tmp_path, env=job_env(), timeout=120)
        rep = json.loads(p.stdout)
        run_dir = next((tmp_path / ".dfdoctor" / "runs").iterdir())
        job_pid = rep["run"]["pid"]
        recorder_pid = next(e for e in _events(run_dir) if e["event"] == "recorder")["pid"]
        os.kill(recorder_pid, signal.SIGKILL)
        assert _wait(lambda: any(e["event"] == "recorder-lost" for e in _events(run_dir)))
        size = log.stat().st_size
        assert _wait(lambda: log.stat().st_size > size + 200)  # the job goes on printing into its log
        assert _alive(job_pid)

        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert v["state"] == "running" and "recorder was killed" in v["summary"], v
        assert v["cause"] not in ("killed-on-session-exit", "killed-by-signal"), v

        os.kill(job_pid, signal.SIGTERM)
        assert _wait(lambda: any(e["event"] == "stand-in-end" for e in _events(run_dir)))
        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert v["state"] == "unknown" and "after its recorder was killed" in v["summary"], v
    finally:
        kill_runs(tmp_path)
