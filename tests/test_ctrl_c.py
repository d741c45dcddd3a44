"""Ctrl-C at any moment of a real `dfdoctor` process: exit 130 and one line, never a Python traceback
(doctor/ctrl_c.py). Round 16: a SIGINT during dfdoctor's own start-up imports printed a traceback from inside an
import and the process died of the signal (exit -2).

Real processes, real SIGINT (sent as a terminal's Ctrl-C reaches one process, dfdoctor's default disposition
restored, as a terminal has it), at increasing delays from the moment its start-up is seen holding SIGINT (its
/proc status): before the package's first line the interpreter's own start-up runs no code of dfdoctor's."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest

from jobs.harness import DFDOCTOR, PY, job_env

JOBS = Path(__file__).parent / "jobs"

SIGINT_BIT, SIGTERM_BIT = 1 << (signal.SIGINT - 1), 1 << (signal.SIGTERM - 1)  # in /proc/PID/status's masks
# dfdoctor as a user starts it: its console script, or `python -m dfdoctor` (round 17: Python's own Ctrl-C
# during its start-up, a traceback and exit -2); each with the words its /proc/PID/cmdline shows once it runs
COMMANDS = {"console script": ([DFDOCTOR], [DFDOCTOR]),
            "python -m dfdoctor": ([PY, "-m", "dfdoctor"], ["-m", "dfdoctor"])}


def _mask(pid: int, field: str) -> Optional[int]:
    """One of the signal masks of /proc/PID/status (SigBlk: blocked, SigIgn: ignored); None once it has ended."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1], 16)
                if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                    return None
    except OSError:
        return None
    return None


def _holds_sigint(pid: int, how: str = "console script") -> Optional[bool]:
    """Whether dfdoctor's process holds SIGINT (None: it has ended). Only once it runs dfdoctor: between fork and
    exec the child is a copy of this process."""
    words = [w.encode() for w in COMMANDS[how][1]]
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
            if not any(parts[i:i + len(words)] == words for i in range(len(parts))):
                return False
    except OSError:
        return None
    mask = _mask(pid, "SigBlk")  # SIGINT alone: a fork (vfork) blocks every signal for its moment, SIGTERM too
    return None if mask is None else bool(mask & SIGINT_BIT) and not mask & SIGTERM_BIT


def _start(disposition, how: str = "console script") -> subprocess.Popen:
    """`dfdoctor check` of a command, SIGINT at `disposition` as it inherits it (a terminal's: SIG_DFL). The
    command's import takes 2 s (imports.smoke waits for it): a Ctrl-C sent past the start-up still finds the command
    at work (round 19: a check of `python -c pass` had ended within the 0.64 s the loop below reaches)."""
    return subprocess.Popen([*COMMANDS[how][0], "check", "--", PY, "-c", "import sleeps_at_import"],
                            env=job_env(PYTHONPATH=str(JOBS)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))


def _until_held(p: subprocess.Popen, how: str, timeout: float = 60.0) -> bool:
    """Poll (tightly: start-up holds it for a few tenths of a second) until the process holds SIGINT; False when it
    ended first or the look missed the hold (a poll starved past it on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = _holds_sigint(p.pid, how)
        if held:
            return True
        if held is None or p.poll() is not None:
            return False
        time.sleep(0.001)
    return False


def _finish(p: subprocess.Popen) -> tuple[str, str]:
    try:
        return p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
@pytest.mark.parametrize("how", COMMANDS)
def test_ctrl_c_during_dfdoctors_start_up_exits_130_without_a_traceback(how):
    """...and one started with SIGINT ignored (Unix's convention: nohup, a script's `cmd &`) holds nothing and
    keeps ignoring it: a Ctrl-C during its start-up changes nothing."""
    delay, landed, missed = 0.0, [], 0
    while len(landed) < 14:
        p = _start(signal.SIG_DFL, how)
        try:
            if not _until_held(p, how):
                missed += 1  # (the look missed the hold; or the start-up never held it: the assert below says)
                assert missed < 6, f"SIGINT was never seen held during dfdoctor's start-up ({missed} starts)"
                p.send_signal(signal.SIGINT)
                continue
            time.sleep(delay)
            during = bool(_holds_sigint(p.pid, how))  # still in its start-up as the Ctrl-C is sent (else: in the command)
            p.send_signal(signal.SIGINT)
        finally:
            out, err = _finish(p)
        landed.append(during)
        assert p.returncode == 130, (delay, during, p.returncode, err[-3000:])
        assert "Traceback" not in err and err.strip().splitlines()[-1:] == ["dfdoctor: interrupted"], (delay, err)
        if not during:
            break  # past its start-up: from here on the command answers Ctrl-C itself, as it did
        delay = delay * 2 if delay else 0.005
    assert sum(landed) >= 3 and not landed[-1], f"Ctrl-C landed during start-up {sum(landed)} times: {landed}"
    _ignored_stays_ignored(how)


def _ignored_stays_ignored(how: str) -> None:
    p = _start(signal.SIG_IGN, how)
    try:
        time.sleep(0.05)
        held = _holds_sigint(p.pid, how)
        p.send_signal(signal.SIGINT)
    finally:
        out, err = _finish(p)
    assert not held and p.returncode in (0, 1) and "dfdoctor check:" in out, (held, p.returncode, out, err)


# A Ctrl-C landing in an at-fork hook (logging's, run as subprocess forks with a preexec_fn): Python prints the
# KeyboardInterrupt as "Exception ignored" and drops it. Made certain here: a hook of the process's own that sends
# the SIGINT, so the handler runs inside it. 3 of 60 real Ctrl-Cs of `dfdoctor check` landed there (exit 0).
AT_FORK = """
import os, signal, subprocess, sys, time
sys.argv[0] = "dfdoctor"  # as the console script's process, holding SIGINT from its first line
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
from dfdoctor import ctrl_c
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))

def run():
    subprocess.run(["true"], preexec_fn=lambda: None)  # (a preexec_fn: the at-fork hooks run)
    time.sleep(2)
    return "completed"

try:
    print(ctrl_c.command(run))
except KeyboardInterrupt:
    print("interrupted")
"""


def test_a_ctrl_c_landing_where_python_cannot_raise_it_still_interrupts_the_command():
    p = subprocess.run([PY, "-c", AT_FORK], env=job_env(), capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stdout.strip() == "interrupted", (p.returncode, p.stdout, p.stderr[-2000:])
    assert "Exception ignored" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


# CPython marks a process "ended by Ctrl-C" when a KeyboardInterrupt leaves an exec() of a string (dataclasses
# build their methods so: a Ctrl-C during an import lands there), even once it was caught, and `python -m` then
# kills itself with SIGINT at exit. 4 of 60 real Ctrl-Cs of `python -m dfdoctor check` ended so (exit -2).
ANSWERED_IN_EXEC = """
import dfdoctor.cli.main as cli

def run(argv=None):
    try:
        exec("raise KeyboardInterrupt")  # where dataclasses' exec was as the Ctrl-C came
    except KeyboardInterrupt:
        return 130  # answered, as run() does

cli.run = run
cli.entry()
"""


def test_python_m_dfdoctor_exits_130_after_a_ctrl_c_answered_inside_an_exec(tmp_path):
    (tmp_path / "answered").mkdir()
    (tmp_path / "answered" / "__main__.py").write_text(ANSWERED_IN_EXEC)
    p = subprocess.run([PY, "-m", "answered"], cwd=tmp_path, env=job_env(), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])


# A Ctrl-C inside a descriptor's __set_name__ (a dataclass's Field, as a class body of a module imported during the
# command runs): Python 3.11 wraps the KeyboardInterrupt into "RuntimeError: Error calling __set_name__ on
# 'Field' ...", which read as dfdoctor's own bug (exit 3, "internal error") in a full run of round 19, once the
# command imported its modules lazily. A real SIGINT, sent from inside __set_name__, during a real command.
IN_SET_NAME = """
import os, signal, sys
import click
import dfdoctor.cli.main as cli

class Sends:
    def __set_name__(self, owner, name):
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, inside the command

@cli.main.command("define")
def define():
    class Lazily:  # as a module imported by the command defines its classes
        field = Sends()
    click.echo("completed")

sys.exit(cli.run(["define"]))
"""


def test_a_ctrl_c_that_python_wraps_into_another_exception_is_an_interruption_not_a_bug():
    p = subprocess.run([PY, "-c", IN_SET_NAME], env=job_env(), capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.returncode == 130 and p.stderr.strip().splitlines()[-1:] == ["dfdoctor: interrupted"], \
        (p.returncode, p.stdout, p.stderr[-2000:])
    assert "internal error" not in p.stderr and "completed" not in p.stdout
