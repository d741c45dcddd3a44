"""torchrun's agent is the program a command line runs, not a word that contains its name. The reading was a
substring of the whole line: a job in a folder named torchrun-something (a worktree, ~/torchrun-exp/) was taken for
torchrun's agent, its one rank never came, and the launch never said running ("0 of 1 ranks are alive")."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from dfdoctor.agent.ranks import is_torchrun, nproc
from jobs.harness import JOBS, PY, kill_runs, launch, text_of


@pytest.mark.parametrize("cmd, want", [
    (["/venv/bin/python", "/venv/bin/torchrun", "--nproc_per_node=2", "train.py"], 2),  # the console script
    (["torchrun", "--standalone", "train.py"], 1),
    (["python3", "-m", "torch.distributed.run", "--nproc-per-node", "4", "train.py"], 4),
    (["python", "-X", "dev", "-mtorch.distributed.launch", "train.py"], 1),
    (["python3", "-u", "/home/u/torchrun-exp/train.py"], None),
    (["python", "train.py", "--note", "torchrun"], None),
    (["python", "-c", "import torchrun"], None),
    (["/opt/torchrun-tools/bin/python", "train.py"], None),
])
def test_torchrun_is_the_program_not_a_word_that_names_it(cmd, want):
    assert nproc(cmd) == want
    assert is_torchrun(cmd) == (want is not None)


def test_a_job_in_a_folder_named_for_torchrun_is_running(tmp_path: Path):
    """healthy.py in ~/torchrun-exp/: one process, no agent; it is called running as any loop is."""
    work = tmp_path / "torchrun-exp"
    work.mkdir()
    shutil.copy(JOBS / "healthy.py", work / "train.py")
    try:
        t0 = time.monotonic()
        proc, rep = launch(work, PY, str(work / "train.py"), "60", watch=60, extra=("--settle", "30"))
        took = time.monotonic() - t0
        assert proc.returncode == 0 and rep["verdict"]["state"] == "running" and took < 20, (took, text_of(rep))
    finally:
        kill_runs(work)
