"""`dfdoctor stop RUN` on real jobs here, with real signals: every process of the job ends (torchrun's ranks in
sessions of their own, a daemon a launcher backgrounded, a job that ignores SIGTERM), nothing else is touched
(a forged run folder naming an unrelated live process, a record copied from another run), and `status` then says
the job was stopped by the user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor.agent.names import MARKER, MARKER_TEXT, RUN_ENV
from dfdoctor.agent.procfs import environ, proc_start_time
from dfdoctor.run import record
from jobs.harness import PY, dfdoctor, job, job_env, kill_runs, launch, needs_torch, status, text_of, wait_for

TORCHRUN = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
# What torchrun's ranks run: sleeps.py, not a rank that imports torch to wait in init_process_group (~1.5 CPU-s a
# test). What stop must reach is torchrun's doing (each rank in a session of its own), whatever the ranks run.
RANKS = job("sleeps.py")[1]


@pytest.fixture
def work(tmp_path: Path):
    """A scratch folder; whatever a failed test left running in it is killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


def _stop(work: Path, *args: str) -> subprocess.CompletedProcess:
    return dfdoctor("stop", "--cwd", str(work), *args, cwd=work, timeout=90)


def _job_processes(run_dir: Path) -> list[psutil.Process]:
    """Every live process that carries the run's marker (what the recorder gave the job)."""
    marker = record.load(run_dir).spawned["marker"]
    out = []
    for p in psutil.process_iter():
        try:
            if (environ(p.pid) or {}).get(RUN_ENV) == marker and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _none_left(procs: list[psutil.Process], timeout: float = 5.0) -> bool:
    def gone(p: psutil.Process) -> bool:
        try:
            return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True
    return wait_for(lambda: all(gone(p) for p in procs), timeout)


def _started(work: Path, *command: str, settle: str = "0") -> Path:
    """Launch a job that keeps running; its run folder."""
    _, rep = launch(work, *command, watch=3, extra=("--settle", settle))
    run_dir = Path(rep["run"]["dir"])
    assert record.load(run_dir).job_alive(), text_of(rep)
    return run_dir


@pytest.mark.slow
def test_a_torchrun_job_is_stopped_whole_ranks_included_and_status_says_so(work):
    needs_torch()
    run_dir = _started(work, *TORCHRUN, RANKS)
    assert wait_for(lambda: len(_job_processes(run_dir)) >= 3, 30), "torchrun and its 2 ranks did not start"
    procs = _job_processes(run_dir)
    assert len({p.pid for p in procs} - {os.getsid(p.pid) for p in procs}) <= 1  # the ranks lead sessions of their own
    t0 = time.monotonic()
    p = _stop(work, run_dir.name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _none_left(procs, 1.0), f"left running: {[q.pid for q in procs if q.is_running()]}\n{p.stdout}"
    assert "torch.distributed.run" in p.stdout and "nothing of the job is left" in p.stdout, p.stdout
    assert all(f"stopped pid {q.pid} " in p.stdout for q in procs), p.stdout  # every one named, ranks too
    assert time.monotonic() - t0 < 10, "SIGTERM was enough: no wait for the grace"
    assert not record.load(run_dir).recorder_alive()  # the recorder saw its job end and left
    rc, st = status(work, run_dir.name)
    v = st["verdict"]
    assert rc.returncode == 0 and v["state"] == "ok" and v["cause"] == "stopped-by-user", text_of(st)
    assert v["summary"].startswith("The job was stopped by you at ") and "SIGTERM" in text_of(st), text_of(st)


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(work):
    run_dir = _started(work, *job("ignores_sigterm.py"))
    assert wait_for(lambda: len(_job_processes(run_dir)) >= 2, 10)  # the job and its worker
    procs = _job_processes(run_dir)
    t0 = time.monotonic()
    p = _stop(work, "--grace", "1.5")
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stdout + p.stderr
    assert _none_left(procs, 1.0)
    assert 1.5 <= took < 15, took
    assert p.stdout.count("(SIGKILL, still there 1.5 s after SIGTERM)") == 2, p.stdout
    assert "SIGTERM ignored" in (run_dir / "stdout.log").read_text()  # it did get the SIGTERM first
    _, st = status(work)
    assert st["verdict"]["cause"] == "stopped-by-user" and "2 of them with SIGKILL" in text_of(st), text_of(st)


def test_the_daemon_a_launcher_backgrounded_is_stopped(work):
    run_dir = _started(work, *job("handoff.py", "60"))
    assert wait_for(lambda: record.load(run_dir).first("handoff") is not None, 10)
    daemons = _job_processes(run_dir)
    # the launcher is gone and its daemon runs in a session of its own, outside the job's process group
    assert len(daemons) == 1 and os.getsid(daemons[0].pid) != record.load(run_dir).spawned["sid"]
    p = _stop(work, run_dir.name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _none_left(daemons, 1.0) and f"stopped pid {daemons[0].pid} (SIGTERM)" in p.stdout, p.stdout
    assert "already gone: pid " in p.stdout  # the launcher itself, which had exited 0
    _, st = status(work)
    assert st["verdict"]["cause"] == "stopped-by-user", text_of(st)


def _forge(work: Path, run_id: str, events: list[dict]) -> Path:
    """A run folder made by hand: the marker, a spec, a record with the events given."""
    d = work / ".dfdoctor" / "runs" / run_id
    d.mkdir(parents=True)
    (d / MARKER).write_text(MARKER_TEXT + run_id)
    (d / "spec.json").write_text(json.dumps({"run_id": run_id, "argv": ["sleep", "300"]}))
    (d / "record.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return d


def test_a_forged_run_folder_naming_a_live_process_signals_nothing(work):
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        ticks = proc_start_time(victim.pid)
        who = {"pid": victim.pid, "start_ticks": ticks, "pgid": victim.pid, "sid": victim.pid}
        _forge(work, "20990101-000000-f0f0", [
            dict(who, event="recorder", t=time.time()),
            dict(who, event="spawned", t=time.time(), argv=["sleep", "300"], marker="20990101-000000-f0f0:" + "0" * 16),
            {"event": "exit", "t": time.time(), "pid": victim.pid, "exit_code": 0,
             "leftover_starts": {str(victim.pid): ticks}}])
        p = _stop(work, "--grace", "1")
        assert p.returncode == 0, p.stdout + p.stderr
        time.sleep(0.3)
        assert victim.poll() is None, "an unrelated process was signalled"
        assert f"left alone: pid {victim.pid} is named in the run folder but nothing proves it" in p.stdout, p.stdout
        assert "stopped pid" not in p.stdout
    finally:
        victim.kill()
        victim.wait()


def test_a_record_copied_into_another_folder_proves_nothing_there(work):
    real = _started(work, *job("sleeps.py"))
    procs = _job_processes(real)
    assert procs
    events = [json.loads(line) for line in (real / "record.jsonl").read_text().splitlines()]
    _forge(work, "20990101-000000-c0c0", events)  # the real run's marker and pids, in a folder of another id
    p = _stop(work, "20990101-000000-c0c0", "--grace", "1")
    assert p.returncode == 0 and "stopped pid" not in p.stdout, p.stdout
    assert all(q.is_running() for q in procs), "a copied record ended the real run's job"
    p = _stop(work, real.name)  # the real folder does
    assert p.returncode == 0 and _none_left(procs), p.stdout


def test_stopping_a_run_that_already_ended_says_it_was_gone(work):
    _, rep = launch(work, sys.executable, "-c", "print('done')", watch=5)
    assert wait_for(lambda: record.load(Path(rep["run"]["dir"])).finished, 10)
    p = _stop(work)
    assert p.returncode == 0 and "already gone: pid " in p.stdout and "nothing of the job was running" in p.stdout
    _, st = status(work)
    assert st["verdict"]["cause"] != "stopped-by-user", text_of(st)  # it ended by itself: that stays the verdict


def test_an_unknown_run_is_a_usage_error(work):
    p = _stop(work, "19990101-000000-dead")
    assert p.returncode == 2 and "no run '19990101-000000-dead'" in p.stderr, p.stderr


@pytest.mark.slow
def test_the_ranks_a_sigkill_of_torchrun_left_running_are_stopped(work):
    """STUCK-FACTS: a SIGKILL of torchrun leaves its ranks running in sessions of their own, for ever."""
    needs_torch()
    run_dir = _started(work, *TORCHRUN, RANKS)
    assert wait_for(lambda: len(_job_processes(run_dir)) >= 3, 30)
    torchrun = psutil.Process(record.load(run_dir).job_pid)
    torchrun.kill()
    ranks = [p for p in _job_processes(run_dir) if p.pid != torchrun.pid]
    assert len(ranks) == 2 and wait_for(lambda: not torchrun.is_running() or torchrun.status() == "zombie", 5)
    # Left behind, as measured with ranks of a real DDP job (ddp_never_joins.py): rank 1, held up before
    # init_process_group, for ever; rank 0, waiting there on the store torchrun's agent held, ends once it sees the
    # store gone, at any time on a loaded machine (round 22: after stop looked), and is then `already gone`. Here
    # both ranks sleep (RANKS): rank 1 must be stopped, rank 0 is stopped or already gone.
    held_up = [r for r in ranks if r.environ().get("RANK") == "1"]
    assert len(held_up) == 1
    time.sleep(1)
    ranks = [r for r in ranks if r.is_running() and r.status() != "zombie"]
    assert held_up[0] in ranks, "the held-up rank did not outlive torchrun's SIGKILL"
    p = _stop(work, run_dir.name)
    assert p.returncode == 0 and f"stopped pid {held_up[0].pid} (SIGTERM)" in p.stdout, p.stdout
    assert all(f"stopped pid {r.pid} (SIGTERM)" in p.stdout or f"already gone: pid {r.pid}" in p.stdout
               for r in ranks), p.stdout
    assert _none_left(ranks, 1.0) and f"already gone: pid {torchrun.pid}" in p.stdout, p.stdout


def test_a_job_whose_recorder_was_killed_is_stopped_by_its_marker_alone(work):
    """Without its recorder (killed alone: the job goes on, its stand-in relays), descent proves nothing any more:
    the marker in the job's own environment does."""
    run_dir = _started(work, *job("sleeps.py"))
    procs = _job_processes(run_dir)
    recorder = psutil.Process(record.load(run_dir).recorder["pid"])
    recorder.kill()
    assert wait_for(lambda: not recorder.is_running() or recorder.status() == "zombie", 5)
    p = _stop(work, run_dir.name)
    assert p.returncode == 0 and f"stopped pid {procs[0].pid} (SIGTERM)" in p.stdout, p.stdout
    assert _none_left(procs, 1.0)


def test_what_stop_prints_and_notes_keeps_the_launchs_secrets_masked(work):
    secret = "hf_Q8vT3kLm9xZp2RwY7nB4cD6fG1hJ5sA0"
    run_dir = _started(work, *job("sleeps.py", "--token", secret))
    p = _stop(work, run_dir.name)
    assert p.returncode == 0 and "stopped pid " in p.stdout and "sleeps.py --token " in p.stdout, p.stdout
    assert secret not in p.stdout, p.stdout
    assert secret not in (run_dir / "launcher.jsonl").read_text()
    _, st = status(work)
    assert secret not in json.dumps(st) and st["verdict"]["cause"] == "stopped-by-user"


def test_a_target_that_cannot_be_reached_is_not_stopped_and_says_so(work):
    d = _forge(work, "20990101-000000-aaaa", [])
    (d / "spec.json").write_text(json.dumps({"run_id": "20990101-000000-aaaa", "argv": ["python3", "t.py"],
                                             "target": "ssh://root@127.0.0.1:1", "remote_dir": "/tmp/x"}))
    p = _stop(work)
    assert p.returncode == 1 and "on ssh://root@127.0.0.1:1" in p.stdout and "NOT stopped: " in p.stdout, p.stdout
    assert not (d / "launcher.jsonl").exists()  # nothing was stopped: no note that says so


def test_a_running_verdict_offers_the_stop_that_ends_it(work):
    """A running job's verdict, at launch and at status, ends its fix with `dfdoctor stop RUN`; that very line
    ends the job (advice that said `kill PID` ended one process and left the rest)."""
    _, rep = launch(work, *job("healthy.py", "120"), watch=3, extra=("--settle", "0"))
    run_dir = Path(rep["run"]["dir"])
    procs = _job_processes(run_dir)
    assert rep["verdict"]["state"] == "running" and procs, text_of(rep)
    advice = f"`dfdoctor stop {run_dir.name}`"
    assert rep["verdict"]["fix"].endswith(f"To end the whole job: {advice}."), rep["verdict"]["fix"]
    _, st = status(work)
    assert st["verdict"]["state"] == "running" and advice in st["verdict"]["fix"], st["verdict"]
    p = _stop(work, *advice.strip("`").split()[2:], "--grace", "2")
    assert p.returncode == 0 and _none_left(procs), p.stdout + p.stderr


def test_stop_without_a_run_takes_the_latest_run_of_its_folder_never_one_launched_elsewhere(tmp_path):
    """`dfdoctor stop` names no run: it takes the latest run launched from --cwd and says so; a folder that
    launched nothing stops nothing (status may show your latest run anywhere; a stop must not end it)."""
    env = job_env(XDG_STATE_HOME=str(tmp_path / "state"))  # an index of runs of this test's own
    here, there, empty = (tmp_path / name for name in ("here", "there", "empty"))
    for d in (here, there, empty):
        d.mkdir()
    try:
        _, mine = launch(here, *job("healthy.py", "120"), watch=2, extra=("--settle", "0"), env=env)
        _, theirs = launch(there, *job("healthy.py", "120"), watch=2, extra=("--settle", "0"), env=env)
        mine_dir, theirs_dir = Path(mine["run"]["dir"]), Path(theirs["run"]["dir"])
        mine_procs, theirs_procs = _job_processes(mine_dir), _job_processes(theirs_dir)
        assert mine_procs and theirs_procs, (text_of(mine), text_of(theirs))

        p = dfdoctor("stop", "--cwd", str(empty), cwd=empty, env=env, timeout=90)
        assert p.returncode == 2 and f"no run was launched from {empty}" in p.stderr, p.stderr
        assert f"`dfdoctor stop {theirs_dir.name}`" in p.stderr, p.stderr  # how to stop the latest, if meant
        assert all(q.is_running() for q in mine_procs + theirs_procs), "a folder with no runs stopped a job"

        p = dfdoctor("stop", "--cwd", str(here), "--grace", "2", cwd=here, env=env, timeout=90)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.splitlines()[0] == f"dfdoctor stop: run {mine_dir.name} (the latest run launched from {here})"
        assert _none_left(mine_procs), p.stdout
        assert all(q.is_running() for q in theirs_procs), "the latest run of another folder was stopped"
    finally:
        kill_runs(here)
        kill_runs(there)


@pytest.mark.slow
def test_stop_q_says_the_run_and_the_outcome_in_one_line(work):
    run_dir = _started(work, PY, "-c", "import time; time.sleep(300)")
    procs = _job_processes(run_dir)
    p = _stop(work, "-q")
    assert p.returncode == 0, p.stdout + p.stderr
    (line,) = p.stdout.splitlines()
    assert line.startswith("dfdoctor stop: run ") and line.endswith(": nothing of the job is left"), line
    assert _none_left(procs)
