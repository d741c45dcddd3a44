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
from jobs.harness import JOBS, PY, job_env, kill_runs, launch, silent_for, text_of, wait_for
from support.no_pyspy import python_without_pyspy

pytestmark = pytest.mark.slow


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.skipif(not stacks.py_spy(), reason="py-spy reads the stacks of the silent job")
def test_a_helper_captured_in_a_temp_file_is_not_the_jobs_log_and_the_busy_process_is_where_it_is(work):
    # the job is busy for the whole watch (past its first 3 s): its verdict is the watch's last look (silent since
    # its start, no sample before 5 s), the same at 5 s as at 10 (10 burned 4 s of a core more for nothing)
    proc, rep = launch(work, PY, "-u", str(JOBS / "compiles_beside_a_captured_helper.py"), watch=6, log=None)
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 0 and v["state"] == "running" and v["cause"] is None, text
    assert "makes progress" in v["summary"] and "compiles_beside_a_captured_helper.py:18" in text, text
    assert "/tmp/tmp" not in text and "time.sleep" not in v["summary"], text


def _dfdoctor_without_pyspy(python: Path, work: Path, *args: str,
                            **env_extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = work / f"report-{time.monotonic_ns()}.json"
    env = job_env(PATH="/usr/local/bin:/usr/bin:/bin", **env_extra)
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
    # past its rhythm (a line every 0.1 s, quiet after 5 s): 6 s and more of silence, spinning (a fixed 8 s
    # after the launch's 2 s watch was some 7 s of it, a core burned for the extra)
    assert wait_for(lambda: silent_for(Path(rep["run"]["dir"])) >= 6.0, 60), "the job did not go silent"
    proc, rep = _dfdoctor_without_pyspy(python, work, "status")
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["state"] == "unknown", text
    assert "it spends CPU, but its stacks could not be read" in v["summary"], text
    assert "py-spy is not installed" in text and "no CPU spent" not in text, text


def test_without_py_spy_a_supervisors_polling_is_not_progress_and_a_rank_that_never_joins_is_not_running(work):
    """torchrun's agent wakes every few tenths of a second to poll its workers: with py-spy that loop is read as
    the agent's (not the job's); without it, wake-ups no stack explains are no progress either (on an H100 without
    py-spy, rank 1 asleep and rank 0 spinning in all_reduce was `running [sleeping]`, exit 0; here rank 0 spins in
    C)."""
    python = python_without_pyspy(work)
    torchrun = Path(PY).parent / "torchrun"
    # rank 0 spins a core for the whole watch (past its first 4 s of silence): the verdict needs a look after 3 s of
    # silence past the ranks' "up" lines (8 s did it here, 5 s was still "its log is growing"); 30 s burned ~18 s
    # of a core more in CI
    proc, rep = _dfdoctor_without_pyspy(python, work, "launch", "--no-check", "--watch", "20", "--", str(torchrun),
                                        "--nproc_per_node", "2", str(JOBS / "rank0_spins_rank1_sleeps.py"))
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["state"] != "running", text
    assert "it spends CPU, but its stacks could not be read" in v["summary"], text


def test_without_py_spy_a_rank_polling_its_own_rendezvous_store_waits_for_the_missing_rank_not_a_download(work):
    """Rank 1 sleeps before init_process_group; rank 0 polls its socket to the rendezvous store, the kernel's
    only view of it without py-spy. That socket's other end is MASTER_ADDR:MASTER_PORT of rank 0's own
    environment: a rendezvous wait (rank-missing, as with py-spy), never `waiting-on-network` with a download's
    fix (HF_HUB_OFFLINE...), as it was in round 15 (its ranks unbuffered; buffered, it was `output-buffered`)."""
    python = python_without_pyspy(work)
    torchrun = Path(PY).parent / "torchrun"
    proc, rep = _dfdoctor_without_pyspy(python, work, "launch", "--no-check", "--watch", "30", "--", str(torchrun),
                                        "--nproc_per_node", "2", str(JOBS / "ddp_never_joins.py"),
                                        PYTHONUNBUFFERED="1")
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["cause"] == "rank-missing", text
    assert "rank 1 never arrived at the rendezvous; rank 0 waits for it on the rendezvous store" in v["summary"], text
    assert "HF_HUB_OFFLINE" not in text and "download" not in text, text
    assert any("rank 1 (pid" in e and "no connection to the rendezvous store" in e for e in v["evidence"]), text
