"""Causes read from what went wrong, not from the last frame: a full /dev/shm is shared memory, not a disk; a write
into a missing folder is output-dir-missing whatever writes it; a parser's refusal names the argument and the
closest option its usage printed. Each from a real job launched for real (tests/jobs)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dfdoctor import causes
from jobs.harness import JOBS, PY, kill_runs, launch

pytestmark = pytest.mark.slow


@pytest.fixture
def work(tmp_path):
    for name in ("shm_cache.py", "writes_missing_dir.py"):
        shutil.copy(JOBS / name, tmp_path / name)
    yield tmp_path
    kill_runs(tmp_path)


def _small_shm_works() -> bool:
    """Whether this machine lets a job have a /dev/shm of its own (a mount namespace: root, unshare)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(not _small_shm_works(), reason="no mount namespace here (needs root and unshare) to give a "
                    "job a 1 MiB /dev/shm of its own")
@pytest.mark.parametrize("how", ["np", "write"])
def test_a_full_dev_shm_is_shared_memory_not_a_disk(work, how):
    # the job alone sees a 1 MiB /dev/shm, as in a container; dfdoctor's own /dev/shm has room, so only the path
    # the job wrote to tells shared memory from a disk
    line = f"mount -t tmpfs -o size=1m tmpfs /dev/shm && exec {PY} shm_cache.py {how}"
    _, rep = launch(work, "unshare", "-m", "sh", "-c", line, watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.SHM_EXHAUSTED, v
    assert "/dev/shm/dfd_cache" in v["summary"] and "shm_cache.py" in v["summary"], v["summary"]
    assert "--shm-size" in v["fix"] and "checkpoint" not in v["fix"], v["fix"]


def test_open_wb_into_a_missing_folder_is_output_dir_missing(work):
    _, rep = launch(work, PY, "writes_missing_dir.py", watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.OUTPUT_DIR_MISSING, v
    assert "out/run1/model.bin" in v["summary"] and "writes_missing_dir.py, line 10" in v["summary"], v["summary"]
    assert "mkdir -p out/run1" in v["fix"], v["fix"]


def test_an_unrecognized_argument_is_named_with_the_closest_option(work):
    proc, rep = launch(work, PY, "writes_missing_dir.py", "--outdir=ckpt", watch=60)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == causes.BAD_ARGUMENTS, v
    assert "--outdir=ckpt" in v["summary"] and "write --out-dir=ckpt instead of --outdir=ckpt" in v["fix"], v
