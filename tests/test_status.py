"""`dfdoctor status`: a run judged again later from its folder, after dfdoctor itself has exited."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from dfdoctor.run import folder, record
from jobs.harness import DFDOCTOR, job, job_env, kill_runs, launch, status, text_of, wait_for


@pytest.fixture
def work(tmp_path: Path):
    """A scratch project folder; whatever a run left alive in it is killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


def test_status_without_runs_is_usage_error(work):
    proc = subprocess.run([DFDOCTOR, "status", "--cwd", str(work)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "XDG_STATE_HOME": str(work / "state")})  # no runs anywhere either
    assert proc.returncode == 2
    assert "no runs" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_status_follows_a_job_from_running_to_done(work):
    # 20 s of work: `launch` takes up to ~8 s to say running on a loaded machine, and status must still find it so
    proc, rep = launch(work, *job("healthy.py", "20"), watch=10, extra=("--settle", "2"))
    assert rep["verdict"]["state"] == "running"
    run_id = rep["run"]["id"]
    proc, st = status(work)
    assert proc.returncode == 0 and st["verdict"]["state"] == "running", text_of(st)
    assert st["mode"] == "status" and st["run"]["id"] == run_id
    assert wait_for(lambda: record.load(Path(rep["run"]["dir"])).finished, timeout=40)
    proc, st = status(work, run_id[:15])
    assert proc.returncode == 0
    assert st["verdict"]["state"] == "ok" and "ran to completion" in st["verdict"]["summary"]


def test_status_of_a_crash_by_path_and_torn_record(work):
    _, rep = launch(work, *job("crash.py"))
    run_dir = Path(rep["run"]["dir"])
    with open(run_dir / "record.jsonl", "ab") as f:
        f.write(b'{"event": "heartbeat", "t": 17')  # a write cut short by a crash
    proc, st = status(work, str(run_dir))
    assert proc.returncode == 1 and st["verdict"]["cause"] == "crashed"
    assert "FloatingPointError" in text_of(st)


def test_runs_are_pruned_by_count(work):
    for _ in range(3):
        launch(work, *job("exited_early.py"), extra=("--keep-runs", "2"))
    runs = folder.list_runs(work)
    assert len(runs) == 2, runs


def _session_cgroup() -> Path:
    d = Path("/sys/fs/cgroup/pids") / f"dfdoctor-test-{uuid.uuid4().hex[:8]}"
    try:
        d.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a pids cgroup here: {exc}")
    return d


def _kill_cgroup(d: Path) -> None:
    """What logind (KillUserProcesses) or an exec teardown does at a session's end: SIGKILL every member."""
    for _ in range(50):
        pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _launch_in_session(work: Path, cg: Path) -> subprocess.CompletedProcess:
    """A session (its own cgroup, like an ssh/pct exec scope) that runs `dfdoctor launch` and returns."""
    cmd = (f'echo $$ > {cg}/cgroup.procs && exec {DFDOCTOR} launch --no-check --cwd {work} '
           f'--log {work}/train.log --watch 10 -- {" ".join(job("healthy.py", "60"))}')
    return subprocess.run(["sh", "-c", cmd], env=job_env(), capture_output=True, text=True, timeout=60,
                          start_new_session=True)


@pytest.mark.slow
@pytest.mark.parametrize("delay,cause", [(0.0, "killed-on-session-exit"), (5.0, "killed-by-signal")])
def test_recorder_killed_with_its_session(work, delay, cause):
    cg = _session_cgroup()
    try:
        proc = _launch_in_session(work, cg)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        time.sleep(delay)
        _kill_cgroup(cg)
    finally:
        _kill_cgroup(cg)
        cg.rmdir()
    proc, st = status(work)
    assert proc.returncode == 1, proc.stdout
    assert st["verdict"]["cause"] == cause, text_of(st)
    assert "without writing the job's exit" in text_of(st)
    if cause == "killed-on-session-exit":
        assert "dfdoctor launch returned" in text_of(st)


def test_status_of_a_quiet_no_redirect_job_that_wrote_its_own_log(work):
    log = work / "train.log"
    code = (f"import time\nwith open({str(log)!r}, 'a') as f:\n    f.write('step 0\\n')\n"
            "time.sleep(30)\n")
    (work / "quiet.py").write_text(code)
    launch(work, job("crash.py")[0], str(work / "quiet.py"), watch=2, extra=("--no-redirect",))
    proc, st = status(work, "--watch", "1")
    # alive and asleep where its code says (issue 23: a waiting job is named, not called running); never a failure
    assert st["verdict"]["state"] in ("running", "unknown") and st["verdict"]["cause"] in (None, "sleeping"), \
        text_of(st)
    assert st["verdict"]["state"] == "running" or "quiet.py:4" in st["verdict"]["summary"], text_of(st)


@pytest.mark.slow
def test_a_recorder_that_ends_while_status_diagnoses_is_read_again_not_called_killed(work, monkeypatch):
    """status read the record while the recorder still ran (no exit yet); the recorder wrote the job's exit and
    ended before the diagnosis looked at it: 'the recorder and its stand-in were killed hard' about a job that
    ended by itself (test_gate_round3's DDP status, under load). The recorder is held (SIGSTOP) across status's
    read and look, and let go to end as the diagnosis begins: the interleaving load made. The look is told the
    job is gone (it is: a zombie its held recorder cannot reap yet, which /proc still lists)."""
    from dfdoctor.launch import local, orchestrate

    run_dir, rec, job = _ended_under_a_stopped_recorder(work)
    try:
        real, calls = orchestrate._diagnose, []

        def recorder_ends_first(run, live):
            if not calls:
                os.kill(rec["pid"], signal.SIGCONT)
                assert wait_for(lambda: not psutil.pid_exists(rec["pid"]) or
                                psutil.Process(rec["pid"]).status() == psutil.STATUS_ZOMBIE, 60)
            calls.append(run.finished)
            return real(run, live)

        monkeypatch.setattr(orchestrate, "_diagnose", recorder_ends_first)
        monkeypatch.setattr(local.RunSource, "look", lambda self, run, watched_s: None)
        got = orchestrate.run_status(work, watch_s=0)
    finally:
        try:
            os.kill(rec["pid"], signal.SIGCONT)
        except ProcessLookupError:
            pass
    v = got.verdict
    assert calls[0] is False, calls  # the diagnosis began on the record read before the exit
    assert v.state == "ok" and v.cause != "killed-by-signal", (v.state, v.cause, v.summary)


@pytest.mark.slow
def test_a_job_that_ended_while_its_recorder_is_stopped_is_said_ended_not_alive_and_silent(work):
    """The job exits while its recorder (its parent) is held with SIGSTOP: a zombie nobody reaps, which /proc
    still lists with the job's start time. `status --watch 0` called it "alive but silent" (round 15); it has
    ended, and its exit status is not known until it is reaped (none is made up). Let go, the recorder reaps it,
    writes its exit, and status says how it ended."""
    run_dir, rec, job = _ended_under_a_stopped_recorder(work)
    try:
        p, st = status(work, "--watch", "0")
    finally:
        os.kill(rec["pid"], signal.SIGCONT)
    v, text = st["verdict"], text_of(st)
    assert p.returncode == 1 and v["state"] == "unknown" and v["cause"] is None, text
    assert v["summary"].startswith(f"The job has ended: its process (pid {job}) exited and is a zombie"), text
    assert f"its recorder (pid {rec['pid']}) is stopped" in v["summary"], text
    assert "not known until it is reaped" in v["summary"] and "alive" not in text, text
    assert st["run"]["exit_code"] is None and st["run"]["signal"] is None, st["run"]
    assert f"kill -CONT {rec['pid']}" in v["fix"] and "dfdoctor stop" not in v["fix"], v["fix"]
    res = next(c for c in st["checks"] if c["id"] == "job.resources")
    assert not res["summary"].startswith("running"), res
    assert wait_for(lambda: record.load(run_dir).finished, 60), "the recorder did not write the job's exit"
    p, st = status(work, "--watch", "0")
    assert p.returncode == 0 and st["verdict"]["state"] == "ok", text_of(st)


def _ended_under_a_stopped_recorder(work: Path):
    """A job that printed a line, then exited while its recorder (its parent) is held with SIGSTOP: a zombie the
    recorder cannot reap yet. The caller lets the recorder go (SIGCONT)."""
    ends = "import os, time\nprint('hi', flush=True)\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\n"
    _, rep = launch(work, sys.executable, "-c", ends, watch=0)
    run_dir = Path(rep["run"]["dir"])
    rec = record.load(run_dir).recorder
    os.kill(rec["pid"], signal.SIGSTOP)
    try:
        job = record.load(run_dir).job_pid
        (work / "go").touch()
        assert wait_for(lambda: psutil.Process(job).status() == psutil.STATUS_ZOMBIE, 60), "the job did not end"
    except BaseException:
        os.kill(rec["pid"], signal.SIGCONT)
        raise
    return run_dir, rec, job
