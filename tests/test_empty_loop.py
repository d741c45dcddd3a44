"""The empty-loader reading (doctor/diagnose/empty_loop.py, loop_looks.py) on the looks of a real job that spins
over a validation loader with no batch (tests/lookalikes/val-split), as the watch takes them under load: a look
py-spy could not take must not turn the finding into a buffered stdout."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose import jobstacks, stacks, stuck
from dfdoctor.diagnose.kernelwait import KernelWait
from dfdoctor.diagnose.waits import main_of
from jobs.harness import PY, job_env

VAL_SPLIT = Path(__file__).resolve().parent / "lookalikes" / "val-split"
pytestmark = pytest.mark.skipif(stacks.py_spy() is None, reason="py-spy is not installed")


@pytest.fixture
def spinning(tmp_path):
    """The val-split lookalike running with 100 rows, --val-split 0.1 and --batch-size 16: by its first eval
    (step 50) it loops over an empty loader forever, its stdout a pipe (block-buffered)."""
    work = tmp_path / "val-split"
    shutil.copytree(VAL_SPLIT, work)
    (work / "data").mkdir()
    subprocess.run([PY, "-c", "import torch; torch.manual_seed(0); torch.save({'x': torch.randn(100, 4), "
                    "'y': torch.randn(100)}, 'data/train.pt')"], cwd=work, check=True, timeout=120)
    proc = subprocess.Popen([PY, "train.py"], cwd=work, env=job_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _in_the_loop(pid: int, timeout: float = 120.0) -> bool:
    """Whether a look shows the job past its start (torch's import, the data's load) and in `cycle`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        look = jobstacks.sample_job(pid, rounds=1)[0].last
        main = main_of(look.stacks.text) if look.stacks.text else None
        if main is not None and any(f.func == "cycle" for f in main.frames):
            return True
        time.sleep(0.5)
    return False


def _failed_look(pid: int) -> jobstacks.Look:
    """A look as jobstacks takes one when py-spy does not answer in time (seen in CI on a loaded machine)."""
    return jobstacks.Look(stacks.Stacks(pid, "", "kernel", "py-spy did not answer within 5 s"),
                          KernelWait("unknown"), None)


@pytest.mark.slow
def test_a_look_that_could_not_be_taken_leaves_the_empty_loader_named_not_a_buffered_stdout(spinning):
    """Two real looks a second apart, the second one failed as py-spy fails under load: the failed look is ignored
    and more looks are taken, so the job is still named an empty loader, never a buffered stdout (CI's failure of
    test_a_validation_split_smaller_than_one_batch_is_named_as_an_empty_loader_not_buffering). Before, a failed
    look dropped the finding every time."""
    assert _in_the_loop(spinning.pid), "the job never reached its loop"
    said = []
    for _ in range(3):  # a loaded machine may leave one round undecided (nothing said: the watch looks again)
        samples = jobstacks.sample_job(spinning.pid)
        job = next(s for s in samples if s.pid == spinning.pid)
        assert job.buffered and len(job.looks) == 2
        job.looks[-1] = _failed_look(spinning.pid)
        found = stuck.judge(samples, quiet_s=11.0)
        said.append(found.cause if found else None)
        assert said[-1] in (None, causes.DATA_EMPTY), (said, found.headline)
        if found is not None:
            break
    assert found is not None and found.cause == causes.DATA_EMPTY, said
    assert "`for data in dl:`" in found.headline and any("could not be read" in line for line in found.lines), \
        found.lines
