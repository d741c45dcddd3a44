"""torchrun launches: the verdict names the first failing rank, how it ended and its own error (real torchrun,
gloo on the CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jobs.harness import job, kill_runs, launch_to_end, text_of
from support.torch_site import torch_site

torch_site()  # skips the file where torch is not installed (support/torch_site.py: why not importorskip)
pytestmark = pytest.mark.slow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


def _torchrun(name: str, *args: str) -> list[str]:
    return [*TORCHRUN, job(name)[1], *args]


def _line_of(text: str) -> int:
    lines = Path(job("ddp_rank_raises.py")[1]).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture(scope="module")
def raised_then_aborted(tmp_path_factory):
    """One torchrun, through the `torchrun` console script (the other tests here use `python -m
    torch.distributed.run`), of the job whose rank 1 raises and then dies with SIGABRT while exiting, for the two
    tests that read it. Each launched its own before (an agent and two ranks importing torch, ~5 CPU-s a run): the
    first accepted either end of rank 1 (CI saw the abort under load), the second made the abort certain."""
    work = tmp_path_factory.mktemp("raised-then-aborted")
    torchrun = Path(sys.executable).with_name("torchrun")  # torch's wheel installs it beside the interpreter
    try:
        yield launch_to_end(work, str(torchrun), *TORCHRUN[3:], job("ddp_rank_raises.py")[1], "abort", watch=60)[1]
    finally:
        kill_runs(work)


def test_rank_that_raises_is_named_with_its_exception(raised_then_aborted):
    """Launched through the `torchrun` console script: both spellings are read as torchrun, so its ranks are
    named. A test of the console script apart, with the same job and the same verdict, started three more
    torch-importing processes (~2.5 CPU-s) to prove no more."""
    v, text = raised_then_aborted["verdict"], text_of(raised_then_aborted)
    assert v["cause"] == "crashed", text
    assert v["summary"].startswith("Rank 1 ("), text
    assert "ValueError: shard 7 is missing on rank 1" in v["summary"]
    assert f"ddp_rank_raises.py, line {_line_of('raise ValueError')}" in v["summary"]
    assert "ChildFailedError" not in v["summary"]
    # how torchrun saw rank 1 end: exit code 1, or SIGABRT from a teardown at exit (CI saw gloo's under load; the
    # job's `abort` makes it certain here, and the next test asserts that path)
    assert "exit code 1" in text or "ValueError, then SIGABRT while exiting" in v["summary"], text
    assert "the [rank1] lines" in text


def test_rank_that_raises_then_aborts_is_named_with_its_exception(raised_then_aborted):
    """The flake CI once saw: rank 1 raised, then died with SIGABRT while exiting. Its exception is the cause."""
    v, text = raised_then_aborted["verdict"], text_of(raised_then_aborted)
    assert "SIGABRT" in text, text  # torchrun really saw the signal, so this is the path under test
    assert v["cause"] == "crashed" and v["summary"].startswith("Rank 1 ("), text
    assert "ValueError: shard 7 is missing on rank 1" in v["summary"], text
    assert "ValueError, then SIGABRT while exiting" in v["summary"], text


def test_rank_that_only_lost_its_peer_is_not_the_cause(work):
    """torchrun saw rank 0 end first, with gloo's "Connection closed by peer": that rank is a casualty. The cause
    is rank 1's own ValueError, printed before it closed its process group (CI saw this order under load)."""
    _, rep = launch_to_end(work, *_torchrun("ddp_rank_raises.py", "casualty"), watch=60)
    v, text = rep["verdict"], text_of(rep)
    assert "torchrun's first observed failure: rank 0 (" in text, text  # so the path under test was taken
    assert v["cause"] == "crashed" and v["summary"].startswith("Rank 1 ("), text
    assert "ValueError: shard 7 is missing on rank 1" in v["summary"], text
    assert "ValueError, then SIGTERM from torchrun" in v["summary"], text
    assert any("rank 0 (local rank 0" in e and "only lost its peer" in e for e in v["evidence"]), text


def test_record_error_file_is_read(work):
    _, rep = launch_to_end(work, *_torchrun("ddp_rank_raises.py", "record"), watch=60)
    text = text_of(rep)
    assert rep["verdict"]["summary"].startswith("Rank 1 ("), text
    assert "its error file " in text and "error.json" in text
    assert "ValueError: shard 7 is missing on rank 1" in text


def test_rank_failing_before_init_is_named_without_a_rank_prefix(work):
    _, rep = launch_to_end(work, *_torchrun("ddp_rank_raises.py", "early"), watch=60)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "cuda-error", text
    assert v["summary"].startswith("Rank 1 (") and "invalid device ordinal" in v["summary"], text
    assert "ranks per node asked for: 2" in text and "LOCAL_RANK" in v["fix"]
    assert "ChildFailedError" not in v["summary"]


def test_rank_killed_by_sigkill_is_named_with_the_signal(work):
    _, rep = launch_to_end(work, *_torchrun("ddp_rank_killed.py"), watch=60)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "killed-by-signal", text
    assert v["summary"].startswith("Rank 1 (") and "SIGKILL" in v["summary"], text


def test_gloo_collective_timeout(work):
    _, rep = launch_to_end(work, *_torchrun("ddp_timeout.py"), watch=60)
    v, text = rep["verdict"], text_of(rep)
    assert v["cause"] == "collective-timeout", text
    assert "Timed out waiting 3000ms" in text and v["summary"].startswith("Rank 0 (")
    assert "timeout=" in v["fix"]


def test_missing_entry_script_under_torchrun(work):
    _, rep = launch_to_end(work, *TORCHRUN, str(work / "no_such_train.py"), watch=60)
    v = rep["verdict"]
    assert v["cause"] == "command-not-found" and "no_such_train.py" in v["summary"], text_of(rep)
