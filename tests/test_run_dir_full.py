"""The run folder's file system fills up while the job runs (here: a real 256 KiB tmpfs, filled by the job's
own output copies), while its --log, elsewhere, keeps growing. The verdict says so instead of "import-hang, has
written nothing", and a plain SIGTERM to the job later reads as SIGTERM, not as a hard kill of job and recorder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.agent.record import Record, RunDirSpace
from jobs.harness import dfdoctor, fill_up, job_env, kill_runs

CHATTY = """
import sys, time
for i in range(100000):
    print(f"step {i} " + "x" * 2000, flush=True)
    time.sleep(0.01)
"""


@pytest.fixture
def small_fs(tmp_path: Path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def _wait(pred, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_a_full_run_folder_is_named_and_a_later_sigterm_reads_as_sigterm(tmp_path, small_fs):
    work = tmp_path / "work"
    work.mkdir()
    (work / "chatty.py").write_text(CHATTY)
    run_dir = small_fs / "run"
    log = work / "train.log"
    try:
        p = dfdoctor("launch", "--no-check", "--watch", "6", "--run-dir", str(run_dir), "--log", str(log),
                     "--format", "json", "--", sys.executable, "chatty.py", cwd=work, env=job_env(), timeout=180)
        rep = json.loads(p.stdout)
        v = rep["verdict"]
        assert v["cause"] == "disk-full" and v["state"] == "running", v
        assert "run folder" in v["summary"]
        assert log.stat().st_size > 300 << 10  # the log went on growing past what the run folder could hold
        assert any(json.loads(ln)["event"] == "run-dir-full"
                   for ln in (run_dir / "record.jsonl").read_text().splitlines())

        pid = rep["run"]["pid"]
        os.kill(pid, signal.SIGTERM)
        assert _wait(lambda: any(json.loads(ln)["event"] == "recorder-exit"
                                 for ln in (run_dir / "record.jsonl").read_text().splitlines() if ln.strip()))
        p = dfdoctor("status", str(run_dir), "--format", "json", cwd=work, env=job_env(), timeout=120)
        v = json.loads(p.stdout)["verdict"]
        assert "SIGTERM" in v["summary"], v
        assert "killed hard" not in v["summary"]
        assert not (run_dir / ".reserve").exists()
    finally:
        kill_runs(work)


def test_a_record_line_the_full_disk_cut_in_two_is_finished_from_the_reserve(small_fs):
    """CI read a torn line in record.jsonl: a write that meets the end of the free space writes part of the
    line and returns its count, with no error; the rest must follow (its own write then fails, which frees the
    reserve, and it is written again), or the next event is glued to the torn half and both are lost."""
    space = RunDirSpace(str(small_fs))
    filler = small_fs / "filler"
    fill_up(filler)  # the job's output fills the file system up to the last page
    os.truncate(filler, max(0, filler.stat().st_size - 6000))  # one page and a half left: a line straddles its end
    rec = Record(str(small_fs / "record.jsonl"), space=space)
    for i in range(40):
        rec.event("tick", n=i, pad="p" * 300)
    lines = (small_fs / "record.jsonl").read_text().splitlines()
    assert space.full is not None, "the file system never filled"
    assert [json.loads(ln)["n"] for ln in lines] == list(range(len(lines))) and len(lines) >= 20, lines[-3:]
