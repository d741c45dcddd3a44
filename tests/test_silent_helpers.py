"""What a silent job is doing, said from what was seen (issue 41, found on a GPU without py-spy in round 15):
- a job that captures a helper's output in a temp file (torch inductor's autotune workers) is not "writing its own
  log" there: it was `unknown` ("that file did not grow ... progress was not established"), exit 1, in a healthy
  compile;
- the busy process is where the job is, not a helper asleep beside it (it was `running [sleeping]` "time.sleep,
  called from <string>:1");
- without py-spy, a process that burns CPU where no stack can be read is neither "nothing moved (no CPU spent)"
  (false) nor progress (it may be a wait that spins: a CUDA synchronise, an NCCL collective): it says so."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from dfdoctor.diagnose import stacks
from jobs.harness import JOBS, PY, job_env, kill_runs, launch, text_of
from support.no_pyspy import python_without_pyspy

pytestmark = pytest.mark.slow


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.skipif(not stacks.py_spy(), reason="py-spy reads the stacks of the silent job")
def test_a_helper_captured_in_a_temp_file_is_not_the_jobs_log_and_the_busy_process_is_where_it_is(work):
    proc, rep = launch(work, PY, "-u", str(JOBS / "compiles_beside_a_captured_helper.py"), watch=10, log=None)
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 0 and v["state"] == "running" and v["cause"] is None, text
    assert "makes progress" in v["summary"] and "compiles_beside_a_captured_helper.py:13" in text, text
    assert "/tmp/tmp" not in text and "time.sleep" not in v["summary"], text


def _dfdoctor_without_pyspy(python: Path, work: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = work / f"report-{time.monotonic_ns()}.json"
    env = job_env(PATH="/usr/local/bin:/usr/bin:/bin")
    p = subprocess.run([str(python), "-m", "dfdoctor", *args[:1], "--cwd", str(work), "--format", "json",
                        "--output", str(out), "--format", "text", *args[1:]], cwd=work, env=env,
                       capture_output=True, text=True, timeout=180)
    assert out.exists(), p.stdout + p.stderr
    return p, json.loads(out.read_text())


def test_without_py_spy_cpu_no_stack_explains_is_said_so_never_no_cpu_spent_nor_progress(work):
    python = python_without_pyspy(work)
    proc, rep = _dfdoctor_without_pyspy(python, work, "launch", "--no-check", "--watch", "2", "--",
                                        str(python), "-u", str(JOBS / "spins_in_c.py"))
    assert rep["run"]["dir"], rep
    time.sleep(8)  # past its rhythm (a line every 0.1 s): 5 s and more of silence, spinning
    proc, rep = _dfdoctor_without_pyspy(python, work, "status")
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["state"] == "unknown", text
    assert "it spends CPU, but its stacks could not be read" in v["summary"], text
    assert "py-spy is not installed" in text and "no CPU spent" not in text, text
