"""The memory cgroup of `--memory-limit` is removed on every path: after an out-of-memory run, and, when the
recorder was SIGKILLed, by the next `dfdoctor status` (which sweeps the empty dfdoctor-* cgroups ended runs left).
Real cgroups, where this machine lets us make one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from dfdoctor.agent.memory import make_limited_cgroup, memory_cgroup, sweep_cgroups
from dfdoctor.run import record
from jobs.harness import JOBS, PY, kill_runs, launch, records, status


def _cgroups_usable() -> str:
    """Why no memory cgroup can be made here ('' when one can)."""
    version, parent = memory_cgroup()
    if not parent:
        return "no memory cgroup is mounted for this process (/sys/fs/cgroup)"
    try:
        os.rmdir(make_limited_cgroup(version, parent, f"dfdoctor-probe-{uuid.uuid4().hex[:8]}", 64 << 20))
    except OSError as exc:
        return f"cannot make a memory cgroup under {parent}: {exc.strerror}"
    return ""


WHY_NOT = _cgroups_usable()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)


@pytest.fixture
def work(tmp_path):
    for name in ("oom.py", "healthy.py"):
        shutil.copy(JOBS / name, tmp_path / name)
    yield tmp_path
    kill_runs(tmp_path)


def _cgroup_of(work) -> str:
    (run_dir,) = records(work)
    made = record.load(run_dir).first("memory-limit")
    assert made, "the recorder made no cgroup"
    return made["cgroup"]


@pytest.mark.slow
def test_an_out_of_memory_run_leaves_no_cgroup(work):
    _, rep = launch(work, PY, "oom.py", watch=60, extra=("--memory-limit", "128M"))
    assert rep["verdict"]["cause"] == "oom-killed", rep["verdict"]
    assert not os.path.exists(_cgroup_of(work))


@pytest.mark.slow
def test_status_sweeps_the_cgroup_a_sigkilled_recorder_left(work):
    _, rep = launch(work, PY, "healthy.py", "60", watch=3, extra=("--memory-limit", "256M"))
    cgroup = _cgroup_of(work)
    run = record.load(records(work)[0])
    os.kill(run.recorder["pid"], signal.SIGKILL)  # the recorder cannot clean up now
    os.killpg(run.spawned["pgid"], signal.SIGKILL)  # and the job ends on its own later
    deadline = time.monotonic() + 10
    while open(os.path.join(cgroup, "cgroup.procs")).read().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.isdir(cgroup)  # what leaked before: nothing removes it
    status(work)
    assert not os.path.exists(cgroup)


def test_the_sweep_keeps_a_cgroup_in_use_and_a_new_one():
    version, parent = memory_cgroup()
    busy = make_limited_cgroup(version, parent, f"dfdoctor-busy{uuid.uuid4().hex[:6]}", 64 << 20)
    young = make_limited_cgroup(version, parent, f"dfdoctor-young{uuid.uuid4().hex[:6]}", 64 << 20)
    ended = make_limited_cgroup(version, parent, f"dfdoctor-ended{uuid.uuid4().hex[:6]}", 64 << 20)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with open(os.path.join(busy, "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        removed = sweep_cgroups([parent], ended={os.path.basename(ended)[len("dfdoctor-"):],
                                                 os.path.basename(busy)[len("dfdoctor-"):]})
        assert removed == [ended] and os.path.isdir(busy) and os.path.isdir(young)
    finally:
        sleeper.kill()
        sleeper.wait()
        for d in (busy, young):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.05)
