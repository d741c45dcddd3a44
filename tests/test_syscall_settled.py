"""A thread caught between two waits is read in its next wait, not as working (round 25).

A loop of 0.1 s sleeps under CPU load is woken and then waits for the CPU: /proc/PID/syscall says "running" for that
while. Read so at the look (before py-spy, which then found it idle), it was called output-buffered in CI's run of
test_stuck's tenth-second sleeps. Each look, here and in a target's agent, reads the call again after short pauses
while it says running. Real processes: one that passes through 8 ms of work on its way into a sleep, and one that
works without end (read as running, as before)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dfdoctor.agent import procfs, target_agent
from dfdoctor.diagnose.kernelwait import SLEEPS, from_raw, kernel_wait

# The job tells us it is about to work, works 8 ms, then sleeps: a first read right after its word finds it running.
PASSES_THROUGH = ("import sys, time\nsys.stdout.write('go\\n'); sys.stdout.flush()\n"
                  "end = time.perf_counter() + 0.008\nwhile time.perf_counter() < end: pass\ntime.sleep(60)\n")
WORKS = "import sys\nsys.stdout.write('go\\n'); sys.stdout.flush()\nwhile True: pass\n"


def _started(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"go\n"
    return p


@pytest.fixture
def generous(monkeypatch):
    """Pauses long enough that the 8 ms of work is over by the last re-read however loaded the machine is: the
    test is of the re-reading, not of how soon a loaded CPU takes the job back."""
    monkeypatch.setattr(procfs, "SYSCALL_REREADS_S", (0.05, 0.2, 0.5))


def _by_agent(pid: int):
    raw = target_agent.one_look(pid, None)
    return from_raw(raw["syscall"], raw["fds"], "")


@pytest.mark.parametrize("look", [kernel_wait, _by_agent], ids=["here", "agent"])
def test_a_job_between_work_and_a_sleep_is_read_asleep(generous, look):
    p = _started(PASSES_THROUGH)
    try:
        seen = look(p.pid)
        assert seen.syscall in SLEEPS, f"read as {seen.syscall!r}, not in its sleep"
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("look", [kernel_wait, _by_agent], ids=["here", "agent"])
def test_a_job_that_keeps_working_is_still_read_running(look):
    p = _started(WORKS)
    try:
        assert look(p.pid).syscall == "running"
    finally:
        p.kill()
        p.wait()
