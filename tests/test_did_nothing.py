"""A job that exits 0 quickly without doing work is `did-nothing`, never ok: every rank of a torchrun job that
prints it found too few GPUs and calls sys.exit() (tests/jobs/needs_gpus.py). And the other side: fast healthy jobs
whose last line sounds like a refusal, but that wrote a file or printed progress, stay ok (tests/jobs/quick_work.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from dfdoctor import causes
from jobs.harness import JOBS, PY, kill_runs, launch

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
pytestmark = pytest.mark.slow


@pytest.fixture
def work(tmp_path):
    for name in ("needs_gpus.py", "quick_work.py", "healthy.py"):
        shutil.copy(JOBS / name, tmp_path / name)
    yield tmp_path
    kill_runs(tmp_path)


def test_every_rank_exiting_0_for_want_of_gpus_did_nothing(work):
    proc, rep = launch(work, TORCHRUN, "--nproc_per_node=2", "needs_gpus.py", watch=60)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["state"] == "failed" and v["cause"] == causes.DID_NOTHING, v
    assert "needs_gpus.py:17 printed why: 'Unable to locate sufficient 4 gpus" in v["summary"], v["summary"]
    assert any("every rank printed it (2 times)" in e for e in v["evidence"]), v["evidence"]
    assert any("no file under its folders changed" in e for e in v["evidence"]), v["evidence"]
    assert "cuda.init" in v["fix"] and "site-packages" not in v["fix"] and "/bin/" not in v["fix"], v["fix"]


def test_ranks_printing_the_same_reason_unbuffered_at_once_are_counted_apart(work):
    # unbuffered ranks that print together leave "whywhy" on one line (seen in CI): still every rank's one line
    proc, rep = launch(work, TORCHRUN, "--nproc_per_node=2", "needs_gpus.py", "together", watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.DID_NOTHING, v
    assert "printed why: 'Unable to locate sufficient 4 gpus to run this example. Exiting.'." in v["summary"], v
    assert any("every rank printed it (2 times)" in e for e in v["evidence"]), v["evidence"]


def test_the_reason_said_through_logging_on_stderr_is_read_too(work):
    proc, rep = launch(work, PY, "needs_gpus.py", "stderr", watch=60)
    v = rep["verdict"]
    assert v["cause"] == causes.DID_NOTHING and "ERROR:root:Unable to locate" in v["summary"], v
    assert "printed once" in " ".join(v["evidence"]), v["evidence"]


@pytest.mark.parametrize("how", ["saves", "steps"])
def test_a_fast_healthy_job_whose_last_line_sounds_like_a_refusal_is_ok(work, how):
    proc, rep = launch(work, PY, "quick_work.py", how, watch=60)
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "ok", v


def test_a_healthy_job_that_prints_steps_is_ok(work):
    proc, rep = launch(work, PY, "healthy.py", "1", watch=60)
    assert rep["verdict"]["state"] == "ok", rep["verdict"]
