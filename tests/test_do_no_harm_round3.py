"""Round 3 of the hostile review, the small findings: what dfdoctor prints of the user's input stays one safe
line (no newline or ESC from an environment variable, no password from an argument)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_dfdoctor


def test_env_prints_cuda_visible_devices_on_one_line_with_its_control_characters_escaped(tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('no torch here')\n")
    res = run_dfdoctor("env", "--python", sys.executable, cwd=tmp_path,
                       env={"PYTHONPATH": str(fake.parent), "CUDA_VISIBLE_DEVICES": "0\n\x1b[2Jfake: line"})
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("CUDA_VISIBLE_DEVICES:"))
    assert line.endswith(" 0\\x0a\\x1b[2Jfake: line"), res.stdout
    assert "\x1b" not in res.stdout and not any(ln.startswith("fake:") for ln in res.stdout.splitlines())


def test_a_password_in_an_argument_is_masked_in_the_usage_error(tmp_path):
    res = run_dfdoctor("check", "--python", "postgres://u:hunter2pw@db/x", "--", "python3", "x.py", cwd=tmp_path)
    assert res.returncode == 2
    assert "hunter2pw" not in res.stderr and "--python postgres://***@db/x" in res.stderr, res.stderr


# ---- a forged run folder proves nothing (finding 7) -------------------------------------------------------------

def _forge(work: Path, real: Path, new_id: str, recorder_pid: int, job_pid: int, leftovers=()) -> Path:
    """A copy of a real run folder whose record names other processes (with their real start times)."""
    from dfdoctor.agent.names import MARKER, MARKER_TEXT
    from dfdoctor.agent.procfs import proc_start_time

    forged = real.parent / new_id
    shutil.copytree(real, forged)
    (forged / MARKER).write_text(MARKER_TEXT + new_id)
    lines = []
    for line in (forged / "record.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("event") == "recorder":
            e.update(pid=recorder_pid, start_ticks=proc_start_time(recorder_pid), sid=os.getsid(job_pid))
        if e.get("event") == "spawned":
            e.update(pid=job_pid, start_ticks=proc_start_time(job_pid))
        if e.get("event") == "exit" and leftovers:
            e.update(leftover_starts={str(p): proc_start_time(p) for p in leftovers})
        lines.append(json.dumps(e))
    (forged / "record.jsonl").write_text("\n".join(lines) + "\n")
    return forged


VICTIM = "import time\nwhile True:\n    time.sleep(0.5)\n"


@pytest.mark.parametrize("recorder", ["the-real-recorder-of-another-folder", "the-victim"])
def test_status_of_a_forged_live_run_neither_samples_nor_names_a_process_to_kill(tmp_path, recorder):
    from jobs.harness import job_env, kill_runs
    from dfdoctor.run import record as run_record

    work = tmp_path / "work"
    work.mkdir()
    (work / "quiet.py").write_text("import time\ntime.sleep(60)\n")
    victim = subprocess.Popen([sys.executable, "-c", VICTIM], start_new_session=True)
    try:
        res = run_dfdoctor("launch", "--no-check", "--watch", "1", "--", sys.executable, "quiet.py", cwd=work,
                           env=job_env())
        real = next((work / ".dfdoctor" / "runs").iterdir())
        run = run_record.load(real)
        assert run.job_alive(), res.stdout + res.stderr  # the real run is proved: the nonce, the recorder's folder
        rec_pid = run.recorder["pid"] if recorder.startswith("the-real") else victim.pid
        forged = _forge(work, real, "20990101-000000-beef", rec_pid, victim.pid)
        assert not run_record.load(forged).recorder_alive() and not run_record.load(forged).job_alive()
        out = run_dfdoctor("status", "--watch", "2", "--format", "json", str(forged), cwd=work, env=job_env())
        doc = json.loads(out.stdout)
        said = json.dumps(doc)
        assert doc["verdict"]["state"] != "running", doc["verdict"]
        assert "time.sleep" not in said and "py-spy" not in said, "the victim was sampled"
        assert f"kill {victim.pid}" not in said and f"-{victim.pid}" not in said
        assert victim.poll() is None
    finally:
        victim.kill()
        kill_runs(work)


def test_leftovers_of_a_forged_run_are_not_named_to_kill(tmp_path):
    from jobs.harness import job_env, kill_runs

    work = tmp_path / "work"
    work.mkdir()
    victim = subprocess.Popen([sys.executable, "-c", VICTIM], start_new_session=True)
    try:
        run_dfdoctor("launch", "--no-check", "--watch", "5", "--", sys.executable, "-c", "print('done')", cwd=work,
                     env=job_env())
        real = next((work / ".dfdoctor" / "runs").iterdir())
        forged = _forge(work, real, "20990101-000000-beef", victim.pid, victim.pid, leftovers=(victim.pid,))
        out = run_dfdoctor("status", "--format", "json", "--only", "job.leftovers", str(forged), cwd=work,
                           env=job_env())
        rec = next(c for c in json.loads(out.stdout)["checks"] if c["id"] == "job.leftovers")
        assert rec["status"] == "warn" and str(victim.pid) in rec["summary"]  # it runs: said, never hidden
        assert f"kill {victim.pid}" not in rec["fix"] and "not proved" in rec["fix"], rec["fix"]
    finally:
        victim.kill()
        kill_runs(work)
