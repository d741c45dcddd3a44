"""The empty-loader reading (doctor/diagnose/empty_loop.py, loop_looks.py) on the looks of a real job that spins
over a validation loader with no batch (tests/lookalikes/val-split), as the watch takes them under load: a look
py-spy could not take must not turn the finding into a buffered stdout."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes
from dfdoctor.diagnose import empty_loop, jobstacks, stacks, stuck
from dfdoctor.diagnose.kernelwait import KernelWait
from dfdoctor.diagnose.waits import main_of
from jobs.harness import PY, job_env, wait_for
from support.made_once import session_folder
from support.torch_data import torch_data

VAL_SPLIT = Path(__file__).resolve().parent / "lookalikes" / "val-split"
pytestmark = pytest.mark.skipif(stacks.py_spy() is None, reason="py-spy is not installed")


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    """The lookalike's data, 100 rows: support/torch_data.py's val-split file (the same code after the same seed),
    made once per run of the suite for this file's jobs and test_lookalikes' val-split test (this file made its
    own: an interpreter that imported torch, 1.4 CPU-s, for the same bytes)."""
    return torch_data(session_folder(tmp_path_factory), "val-split/train.pt")


def _started(folder: Path, rows: Path, *args: str):
    """The val-split lookalike running with 100 rows, --val-split 0.1 and --batch-size 16 (and `args`): by its
    first eval it loops over an empty loader forever, its stdout a pipe (block-buffered)."""
    work = folder / "val-split"
    shutil.copytree(VAL_SPLIT, work)
    (work / "data").mkdir()
    shutil.copy(rows, work / "data" / "train.pt")
    return subprocess.Popen([PY, "train.py", *args], cwd=work, env=job_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def spinning(tmp_path_factory, rows):
    """The val-split job, in its empty loop by its first eval (step 50): one for the file's three tests that only
    look at it (each started its own: an import of torch, the data's load and 50 steps, ~2 CPU-s a test). They
    are the file's last, so that it stops spinning once they are done."""
    proc = _started(tmp_path_factory.mktemp("spinning"), rows)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def trains_first(tmp_path, rows):
    """The val-split job training 2,000 steps (0.6 CPU-s here) before its first eval, whose loader is empty. The
    test's looks catch it training within its first steps (measured: 2 of 3 looks in training show the loss or
    optimiser lines, a look every 15 ms of the job's CPU: ~40 looks fit in the 2,000 steps); the steps after
    that look are spent waiting for the eval's loop (20,000 made it 6.6 CPU-s, 5,000 ~1 CPU-s more than 2,000)."""
    proc = _started(tmp_path, rows, "--eval-every", "2000", "--steps", "1000000000")
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _in_the_loop(pid: int, timeout: float = 120.0) -> bool:
    """Whether a look shows the job past its start (torch's import, the data's load, its training steps) and in
    `cycle` under its eval's `next(val_dl)`: `cycle` under `next(train_dl)` is a training step, which fetches."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        look = jobstacks.sample_job(pid, rounds=1)[0].last
        main = main_of(look.stacks.text) if look.stacks.text else None
        if main is not None and any(f.func == "cycle" for f in main.frames) and \
                any(f.func == "main" and "next(val_dl)" in _line(f) for f in main.frames):
            return True
        time.sleep(0.5)
    return False


def _line(f) -> str:
    try:
        return Path(f.file).read_text().splitlines()[f.line - 1]
    except (OSError, IndexError):
        return ""


def _training(look: jobstacks.Look) -> bool:
    """Whether a look shows the job in a training step's body (the loss, its backward, the optimiser's step), its
    main thread's innermost frame of train.py in `main`, importing nothing (the optimiser's first step may)."""
    main = main_of(look.stacks.text) if look.stacks.text else None
    mine = [f for f in main.frames if f.file.endswith("train.py")] if main is not None else []
    return bool(mine) and mine[0].func == "main" and ("loss" in _line(mine[0]) or "opt." in _line(mine[0])) and \
        not any(f.func == "_find_and_load" for f in main.frames)


def _failed_look(pid: int) -> jobstacks.Look:
    """A look as jobstacks takes one when py-spy does not answer in time (seen in CI on a loaded machine)."""
    return jobstacks.Look(stacks.Stacks(pid, "", "kernel", "py-spy did not answer within 5 s"),
                          KernelWait("unknown"), None)


@pytest.mark.slow
def test_a_look_that_caught_the_job_training_before_its_empty_eval_is_no_buffered_stdout(trains_first):
    """The watch's first look caught the job in a training step (at train.py's loss or optimiser lines), the
    looks after it in its evaluation's empty loop at the same `for` head (`cycle`'s): the training look ruled the
    empty loader out and the busy silence was called a buffered stdout (CI, a full run under load: `output-buffered
    (0.3 s of CPU, woken 175 times ... at cycle (train.py:20))`). The looks that show the loop now are the
    observation; the buffered stdout a guess: nothing is said from these looks (the watch looks again), and a
    round of fresh looks names the empty loader. Real looks of one job, as the watch took them: the first in
    training, the second failed (py-spy under load). (Left, round 18: a second look read in the loop instead,
    then more looks, still read as a buffered stdout about one time in seven here.)"""
    job = None
    end = time.monotonic() + 120
    while job is None and time.monotonic() < end and trains_first.poll() is None:
        s = jobstacks.sample_job(trains_first.pid, rounds=1)[0]
        job = s if s.last.cpu_s is not None and _training(s.last) else None
    assert job is not None, "no look caught the job in a training step"
    trained = job.looks[0]
    assert _in_the_loop(trains_first.pid), "the job never reached its eval's loop"
    cpu = lambda: sum(psutil.Process(trains_first.pid).cpu_times()[:2])  # noqa: E731
    assert wait_for(lambda: cpu() > trained.cpu_s + 0.5, timeout=120, step=0.2), "the job spent no CPU in its loop"
    job.looks = [trained, _failed_look(trains_first.pid)]  # as in CI: the second look failed
    found = stuck.judge([job], quiet_s=11.0)
    said = [found.cause if found else None]
    assert causes.OUTPUT_BUFFERED not in said, said
    for _ in range(3):  # fresh looks, all in the loop: the empty loader (a loaded machine may leave one undecided)
        found = stuck.judge(jobstacks.sample_job(trains_first.pid), quiet_s=11.0)
        said.append(found.cause if found else None)
        if found is not None:
            break
    assert said[1:] and said[-1] == causes.DATA_EMPTY and set(said[1:]) <= {None, causes.DATA_EMPTY}, said


BUSY_RANGE = Path(__file__).resolve().parent / "jobs" / "works_buffered.py"  # `for i in range(2000000): x += i`


@pytest.fixture
def busy_range(tmp_path):
    """A job that works in a plain `for i in range(n)` loop, its stdout a pipe (block-buffered), no DataLoader."""
    proc = subprocess.Popen([PY, str(BUSY_RANGE)], cwd=tmp_path, env=job_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _user_line(look: jobstacks.Look) -> int | None:
    main = main_of(look.stacks.text) if look.stacks.text else None
    return next((f.line for f in main.frames if f.file == str(BUSY_RANGE)), None) if main is not None else None


@pytest.mark.slow
def test_a_busy_range_loop_seen_in_its_body_then_at_its_head_is_a_buffered_stdout_not_a_loop_resumed(busy_range):
    """CI (round 19, 8 workers): `dfdoctor status` of a buffered Slurm job said `running`: its one look on the node
    caught `x += i` (line 9) first and then the bare head `for i in range(2000000):` (line 8), which read as an
    empty loader's loop resumed after a look in its body, and held the buffered reading back. No DataLoader runs a
    pass at a `range(...)` head: real looks of the job in that order, judged as a node's look is (no more looks
    taken), name the buffered stdout. Before, nothing was said from them (undecided)."""
    said: list = []
    end = time.monotonic() + 120
    while not said and time.monotonic() < end and busy_range.poll() is None:
        samples = jobstacks.sample_job(busy_range.pid)
        job = next(s for s in samples if s.pid == busy_range.pid)
        if [_user_line(lk) for lk in job.looks] != [9, 8]:
            continue  # (the order is the looks' luck: each catches the loop at its head or in its body)
        assert job.buffered
        found = stuck.judge(samples, quiet_s=30.0, local=False)
        said.append(found.cause if found else None)
    assert said == [causes.OUTPUT_BUFFERED], said


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


@pytest.mark.slow
def test_a_slurm_nodes_looks_that_leave_the_empty_loader_undecided_are_unknown_not_running(spinning):
    """Round 20: on a Slurm node no more looks are taken (the pids are the node's), so two looks may lean towards
    the empty loader without proving it; its passes move the stack, which is no progress. The job's two real
    looks (the node's agent takes the same two; only srun's transport is left out) judged by the Slurm rules:
    `unknown`, naming the lean. It was `running` ("its output file has not grown in 3 s")."""
    from dfdoctor.slurm import onnode
    from dfdoctor.slurm.job import JobFacts
    from dfdoctor.slurm.rules import Seen, judge

    assert _in_the_loop(spinning.pid), "the job never reached its loop"
    rounds = []
    for _ in range(30):  # about a round in three leaves it undecided (the others prove it or see a buffer)
        look = onnode.judged("node1", jobstacks.sample_job(spinning.pid), quiet_s=40.0)
        rounds.append(look.finding.cause if look.finding else look.leaning)
        # the lean this test names (a look py-spy could not read leaves a bare `for` head's lean instead: round 23's
        # run of round 22's main met it, and the assertion below read the other words)
        if look.finding is None and look.leaning == empty_loop.LEAN and stuck.progress(stuck.seen(look.samples)):
            break
    else:
        pytest.fail(f"no round of two looks left the empty loader undecided while its stack moved: {rounds}")
    f = JobFacts("42", state="RUNNING", nodes="node1", stdout="/nonexistent/o-42.log", source=["scontrol"])
    v = judge(Seen(job=f, stdout_exists=True, quiet_s=40.0, watched_s=3.0, node_look=look))
    assert (v.state, v.cause) == ("unknown", None), (v.summary, v.evidence)
    assert "lean towards a loop over a DataLoader that yields no batch (an empty loader) without proving it" in \
        v.summary and "has not changed for 40 s" in v.summary, v.summary


def _at_bare_head(look: jobstacks.Look) -> bool:
    """Whether a look caught the job at `for data in dl:` in `cycle` with no frame of torch's DataLoader under it
    (between two passes), its innermost frame the loop's head."""
    main = main_of(look.stacks.text) if look.stacks.text else None
    return main is not None and bool(main.frames) and main.frames[0].func == "cycle" and \
        "for data in dl" in _line(main.frames[0])


def _unread(look: jobstacks.Look) -> jobstacks.Look:
    """The same look as a node's agent gives it when py-spy could not read the stack (seen 9 in 300 here)."""
    return jobstacks.Look(stacks.Stacks(look.stacks.pid, "", "kernel", "no Python stack there"), look.kernel,
                          look.cpu_s, look.switches, look.at, look.voluntary)


@pytest.mark.slow
def test_a_slurm_nodes_looks_that_catch_the_empty_loader_only_at_its_head_are_unknown_not_output_buffered(spinning):
    """Round 21: `dfdoctor status slurm:N` of the val-split job said `output-buffered` when its node's two looks
    both caught the job at `for data in dl:` with no DataLoader pass under it (between two passes), or one there
    and the other not read by py-spy: no pass seen, so nothing held the buffered reading back, and a node takes no
    more looks. Real looks of the job caught so, paired in each order, judged as a node's look is: `unknown`
    (nothing in the job's buffer is seen), saying where the looks caught it. Before: `output-buffered` each time."""
    from dfdoctor.slurm import onnode
    from dfdoctor.slurm.job import JobFacts
    from dfdoctor.slurm.rules import Seen, judge

    assert _in_the_loop(spinning.pid), "the job never reached its loop"
    first = last = None  # two looks at the bare head, the job's CPU grown between them (it works: not steady)
    end = time.monotonic() + 240
    while last is None and time.monotonic() < end:
        samples = jobstacks.sample_job(spinning.pid, rounds=1)
        look = samples[0].last
        if look.cpu_s is None or not _at_bare_head(look):
            continue
        if first is None:
            first = look
        elif look.cpu_s - first.cpu_s > 0.5:
            last = look
    assert last is not None, "no two looks caught the job at its loop's head (about 1 in 30 does)"
    job = samples[0]
    assert job.buffered
    said = {}
    for name, looks in {"head, head": [first, last], "head, unread": [first, _unread(last)],
                        "unread, head": [_unread(first), last]}.items():
        job.looks = looks
        look = onnode.judged("node1", [job], quiet_s=40.0)
        f = JobFacts("42", state="RUNNING", nodes="node1", stdout="/nonexistent/o-42.log", source=["scontrol"])
        v = judge(Seen(job=f, stdout_exists=True, quiet_s=40.0, watched_s=3.0, node_look=look))
        said[name] = (v.state, v.cause, v.summary)
    assert {(state, cause) for state, cause, _ in said.values()} == {("unknown", None)}, said
    assert all("at the head of `for data in dl:` (train.py:20)" in summary and "without proving it" in summary
               for _, _, summary in said.values()), said
