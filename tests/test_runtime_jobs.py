"""Jobs that die of what ML jobs die of at run time, launched for real: each gets its own cause and a fix for
that cause (file descriptors, a full disk while checkpointing, an offline download, SIGTERM from outside, an
entry point never called)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from jobs.harness import PY, job, kill_runs, launch, launch_to_end, status, text_of, wait_for


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


def test_too_many_open_files(work):
    _, rep = launch_to_end(work, "sh", "-c", f"ulimit -n 64 && exec {PY} {job('fd_leak.py')[1]}", watch=30)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "fd-exhausted", text
    assert "Too many open files" in text and "fd_leak.py, line 17" in v["summary"]
    assert "ulimit -n" in v["fix"]


@pytest.fixture
def small_fs(tmp_path: Path):
    """A 512 KiB tmpfs: a real file system that fills up (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("how", ["torch", "json"])
def test_disk_full_while_saving_a_checkpoint(work, small_fs, how):
    if how == "torch":
        pytest.importorskip("torch")
    args = [str(small_fs)] + (["--json"] if how == "json" else [])
    _, rep = launch_to_end(work, *job("ckpt_disk_full.py", *args), watch=30)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "disk-full", text
    assert str(small_fs) in v["summary"] and "ckpt_disk_full.py" in v["summary"]
    assert f"df -h {small_fs}" in v["fix"]
    assert "step 19" in (work / "train.log").read_text(), "the job logged for a while first"
    # round 3: where (the folder, its file system, its size and what is free) and the line that wrote there
    assert f"into {small_fs}, on the file system mounted at {small_fs} (0.5 MiB, " in v["summary"], v["summary"]
    assert any(e.startswith("the write: ") and "ckpt_disk_full.py, line" in e for e in v["evidence"]), v["evidence"]


def test_a_read_only_file_system_is_not_called_full(work, tmp_path):
    """Round 3: EROFS reports no free space; "free space there" would not help."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "ro"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=512k", "tmpfs", str(mnt)], check=True)
    try:
        _, rep = launch_to_end(work, *job("ckpt_disk_full.py", str(mnt), "--json"), watch=30)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "read-only-fs", text
    assert f"could not write into {mnt}: its file system is read-only (mounted at {mnt})" in v["summary"], text
    assert "free space" not in v["summary"].lower() and "df -h" not in v["fix"], text
    assert any(e.startswith("the write: ") and "open(path" in e for e in v["evidence"]), text


def test_download_fails_offline(work):
    _, rep = launch_to_end(work, *job("download_offline.py"), watch=30)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "download-failed", text
    assert "models.dfdoctor.invalid" in v["summary"]
    # its own urlopen, not a hub's: the fix names the URL and the job's line, no Hugging Face cache
    assert "https://models.dfdoctor.invalid/resnet18/weights.pth" in v["fix"] and "download_offline.py:9" in v["fix"]
    assert "HF_HUB_OFFLINE" not in v["fix"] and "dfdoctor check" not in v["fix"]


def test_sigterm_from_outside_is_not_a_crash(work):
    from dfdoctor.run import record

    _, rep = launch(work, *job("healthy.py", "400"), watch=3)
    assert rep["verdict"]["state"] == "running", text_of(rep)
    os.kill(rep["run"]["pid"], signal.SIGTERM)  # a scheduler's or a user's stop
    run_dir = Path(rep["run"]["dir"])
    assert wait_for(lambda: record.load(run_dir).finished, timeout=20)
    _, rep = status(work, run_dir.name)
    v = rep["verdict"]
    assert v["cause"] == "killed-by-signal" and "SIGTERM" in v["summary"], text_of(rep)


def test_entry_point_never_called_exits_early(work):
    _, rep = launch_to_end(work, *job("main_not_called.py"), watch=20)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "exited-early", text
    assert "but warnings" in v["summary"] and "FutureWarning" in text
    assert "__main__" in v["fix"]
