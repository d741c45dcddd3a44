"""Causes read from what went wrong, not from the last frame: a full /dev/shm is shared memory, not a disk; a write
into a missing folder is output-dir-missing whatever writes it; a parser's refusal names the argument and the
closest option its usage printed. Each from a real job launched for real (tests/jobs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dfdoctor import causes
from jobs.harness import JOBS, PY, kill_runs, launch

pytestmark = pytest.mark.slow


@pytest.fixture
def work(tmp_path):
    for name in ("shm_cache.py", "writes_missing_dir.py", "asserts_data.py", "needs_extra/train.py",
                 "needs_extra/framework.py", "ddp_cpu/positional.py"):
        shutil.copy(JOBS / name, tmp_path / Path(name).name)
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
    assert "mkdir -p out/run1" in v["fix"] and "pass --out-dir=AN_EXISTING_FOLDER" in v["fix"], v["fix"]


def test_an_unrecognized_argument_is_named_with_the_closest_option(work):
    proc, rep = launch(work, PY, "writes_missing_dir.py", "--outdir=ckpt", watch=60)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == causes.BAD_ARGUMENTS, v
    assert "--outdir=ckpt" in v["summary"] and "write --out-dir=ckpt instead of --outdir=ckpt" in v["fix"], v


@pytest.mark.parametrize("args, path, option", [
    ((), "data/shakespeare/train.bin", "--data-dir (default 'data/shakespeare')"),
    (("--data-dir", "/nonexistent/corpus"), "/nonexistent/corpus/train.bin", "--data-dir /nonexistent/corpus"),
])
def test_a_bare_assert_that_a_path_exists_names_the_path_and_its_option(work, args, path, option):
    _, rep = launch(work, PY, "asserts_data.py", *args, watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.INPUT_MISSING, v
    assert f"checks that {path} exists at" in v["summary"] and "asserts_data.py, line 14" in v["summary"], v
    assert any(option in e for e in v["evidence"]), v["evidence"]
    assert "--data-dir" in v["fix"], v["fix"]


def test_a_framework_naming_its_missing_extra_gives_its_install_line(work):
    _, rep = launch(work, PY, "train.py", watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.DEPENDENCY_MISSING, v
    assert "pip install 'jsonargparse[signatures]>=4.27.7'" in v["fix"], v["fix"]


def test_one_rank_per_gpu_without_gpus_blames_the_launch_line_not_torchrun(work):
    torchrun = str(Path(sys.executable).parent / "torchrun")
    _, rep = launch(work, torchrun, "--nproc_per_node=gpu", "positional.py", watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.CUDA_UNAVAILABLE, v
    assert "(--nproc_per_node=gpu)" in v["summary"] and "bin/torchrun" not in v["summary"], v["summary"]
    assert "--nproc_per_node=2" in v["fix"] and "site-packages" not in v["fix"] and "bin/" not in v["fix"], v["fix"]
