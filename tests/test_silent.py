"""A live job that is quiet and that nothing shows to be broken (issue 34, issue 33 finding 6): `running`, exit 0,
with where it is silent ("time.sleep, called from setup() at x.py:8"; a process that is not Python said so), one
age in the user's words, and whether its output sits in a block buffer. `import-hang` only when a stack shows an
import (tests/test_launch.py's test_import_hang_with_stacks keeps that one)."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest

from dfdoctor.diagnose import stacks
from jobs.harness import JOBS, job, kill_runs, launch, status, text_of

pytestmark = pytest.mark.skipif(not stacks.py_spy(), reason="py-spy reads the stacks of the silent job")

AGES = re.compile(r"running for (\d+) s; (no line yet|last line (\d+) s ago)$")


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


def _silent(rep: dict, proc) -> dict:
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "running", text_of(rep)
    assert "silent" in v["summary"] and v["cause"] != "import-hang", text_of(rep)
    assert AGES.match(v["evidence"][0]), text_of(rep)
    assert not any("settle time" in e for e in v["evidence"]), text_of(rep)
    return v


def test_a_command_that_is_not_python_and_sleeps(work):
    proc, rep = launch(work, "sleep", "60", watch=8)
    v = _silent(rep, proc)
    assert v["cause"] == "sleeping" and "`sleep 60`" in v["summary"] and "not a Python process" in v["summary"], v
    assert "nothing written in the" in v["summary"] and v["evidence"][0].endswith("no line yet"), text_of(rep)


def test_a_python_setup_that_runs_a_quiet_child_names_the_child_and_the_line_that_started_it(work):
    proc, rep = launch(work, *job("spawns_quiet_child.py"), watch=8)
    v = _silent(rep, proc)
    assert "`sleep 600`" in v["summary"] and "not a Python process" in v["summary"], v["summary"]
    assert "started by setup() at " in v["summary"] and "spawns_quiet_child.py:6" in v["summary"], v["summary"]


def test_a_launcher_in_a_quiet_wget_that_never_gets_an_answer_is_unknown_with_its_wait_named(work):
    """Issue 41: running is earned. Nothing moves (no stack changes, no CPU, no byte comes): dfdoctor cannot tell
    whether that read ends, so `unknown` (exit 1) with the wait named, never green."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # the kernel accepts the connection; nothing ever answers
    try:
        port = server.getsockname()[1]
        proc, rep = launch(work, "sh", str(JOBS / "fetch_never_answered.sh"), str(port), watch=8)
        v = rep["verdict"]
        assert proc.returncode == 1 and v["state"] == "unknown", text_of(rep)
        assert "The job is alive" in v["summary"] and "nothing moved between two looks" in v["summary"], v
        assert "`wget" in v["summary"] and "not a Python process" in v["summary"], v["summary"]
        assert f"a read from 127.0.0.1:{port}" in v["summary"], v["summary"]
    finally:
        server.close()


def test_a_buffered_setup_asleep_says_where_and_that_its_line_waits_in_the_buffer(work):
    proc, rep = launch(work, *job("setup_sleeps_buffered.py"), watch=10)
    v = _silent(rep, proc)
    assert v["cause"] == "sleeping", text_of(rep)
    assert re.search(r"time\.sleep, called from setup\(\) at \S*setup_sleeps_buffered\.py:8\.", v["summary"]), v
    assert "Its output is block-buffered" in v["summary"] and "-u" in v["fix"], text_of(rep)


def test_status_says_the_real_silence_not_its_own_watch_and_no_output_age_without_output(work):
    proc, rep = launch(work, "sleep", "60", watch=0)
    assert rep["verdict"]["state"] == "running", text_of(rep)
    time.sleep(7)
    proc, st = status(work, "--watch", "2")
    v = _silent(st, proc)
    said = int(re.search(r"nothing written in the (\d+) s since its start", v["summary"])[1])
    assert said >= 7, v["summary"]  # the job's silence, not status's 2 s
    assert int(AGES.match(v["evidence"][0])[1]) >= 7, text_of(st)
    assert not any("last output" in e for e in v["evidence"]), text_of(st)
