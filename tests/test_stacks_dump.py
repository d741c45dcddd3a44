"""stacks.dump: why py-spy could not read a process's stacks, as the evidence quotes it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dfdoctor.agent import target_agent
from dfdoctor.agent.pyspy_words import py_spy_error
from dfdoctor.diagnose import stacks


def test_a_failed_py_spy_dump_gives_its_error_not_a_backtrace_frame(monkeypatch):
    """py-spy on a process that runs no Python fails, and with RUST_BACKTRACE=1 (inherited from the user's shell)
    prints a Rust backtrace after its error: the reason is the error line, never the backtrace's last frame."""
    if not stacks.py_spy():
        pytest.skip("py-spy is not installed")
    monkeypatch.setenv("RUST_BACKTRACE", "1")
    p = subprocess.Popen(["sleep", "300"])
    try:
        printed = subprocess.run([stacks.py_spy(), "dump", "--pid", str(p.pid)], capture_output=True, text=True,
                                 timeout=60).stderr
        assert "Stack backtrace:" in printed, printed  # the case this test is about: an error, then frames
        st = stacks.dump(p.pid, timeout=60)
        assert st.tool == "kernel" and st.error is not None
        said = next(line for line in printed.splitlines() if line.startswith("Error: "))  # py-spy's error line
        assert st.error.startswith(said) and "python" in st.error.lower(), (st.error, printed)
        # the target agent reads a job's stacks on its machine the same way, and says the same
        assert target_agent.py_spy_dump(stacks.py_spy(), p.pid) == (None, st.error)
    finally:
        p.kill()
        p.wait()


def test_the_reason_skips_a_rust_backtrace():
    """Lines py-spy prints: its error (maybe with a cause), then the backtrace's frames and their locations."""
    printed = ("Error: Failed to copy PyFrameObject\n\nCaused by:\n    Bad address (os error 14)\n\nStack backtrace:\n"
               "   0: anyhow::error::<impl anyhow::Error>::msg\n             at src/lib.rs:10:5\n  10: main\n")
    assert py_spy_error(printed) == "Error: Failed to copy PyFrameObject: Bad address (os error 14)"
    several = printed.replace("    Bad address (os error 14)\n", "    0: Bad address (os error 14)\n    1: deeper\n")
    assert py_spy_error(several) == "Error: Failed to copy PyFrameObject: Bad address (os error 14)"
    assert py_spy_error("Error: no such process\n") == "Error: no such process"
    assert py_spy_error("permission denied\nStack backtrace:\n  0: main\n") == "permission denied"
    assert py_spy_error("Stack backtrace:\n  0: main\n") is None


def _slow_first_py_spy(tmp_path):
    """py-spy behind a wrapper that starts 0.8 s late the first time only (a loaded machine's first start)."""
    spy = stacks.py_spy()
    if not spy:
        pytest.skip("py-spy is not installed")
    slow = tmp_path / "py-spy"
    slow.write_text(f"#!/bin/sh\n[ -e {tmp_path}/started ] || {{ touch {tmp_path}/started; sleep 0.8; }}\n"
                    f"exec {spy} \"$@\"\n")
    slow.chmod(0o755)
    return slow


def test_the_agents_two_looks_read_a_process_a_second_apart_however_slowly_py_spy_starts(tmp_path):
    """A lock cycle, or any wait, is one both looks show a second apart (diagnose/look.lasting_cycle): a passing
    one is shorter. Under load py-spy may take most of that second to start and read: with the second look counted
    from the start of the first, the two reads were 0.41 s apart at load 16-22, and a compile lock held 0.8 s
    would have shown in both. Here the first read is slowed by 0.8 s (a loaded machine's start), the second not."""
    slow = _slow_first_py_spy(tmp_path)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (job,) = target_agent.sample([p.pid], str(slow))["procs"]
        first, second = job["looks"]
        assert first["stack"] and second["stack"], job  # both read (the slow start was the first's)
        assert second["t"] - first["t"] >= 1.0, f"the reads ended {second['t'] - first['t']:.2f} s apart"
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("first", ["its own", "taken ahead"])
def test_the_local_looks_read_a_process_a_second_apart_however_slowly_py_spy_starts(tmp_path, monkeypatch, first):
    """The same for a look on this machine (jobstacks.sample_job), whether it takes its first round itself or is
    handed one the watch took ahead (launch/lookahead.py): counted from the start of the first round, the two reads
    were 0.80 s apart at load 14, and here, the first read slowed by 0.8 s, 0.2 s."""
    from dfdoctor.diagnose import jobstacks

    slow = _slow_first_py_spy(tmp_path)
    monkeypatch.setenv("PATH", f"{slow.parent}:{os.environ.get('PATH', '')}")  # stacks.py_spy() finds it first
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ahead = jobstacks.first_round(p.pid) if first == "taken ahead" else None
        (job,) = jobstacks.sample_job(p.pid, ahead=ahead)
        assert ahead is None or ahead.used
        one, two = job.looks
        assert one.stacks.tool == two.stacks.tool == "py-spy", job  # both read (the slow start was the first's)
        assert two.at - one.at >= jobstacks.GAP_S, f"the reads ended {two.at - one.at:.2f} s apart"
    finally:
        p.kill()
        p.wait()
