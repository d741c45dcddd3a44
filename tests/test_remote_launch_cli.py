"""`launch`/`status --target` without the target infrastructure: a target that does not answer, bad usage."""

from __future__ import annotations

import json
import time

from dfdoctor.run.folder import new_run


def test_unreachable_target_is_a_finding_not_a_crash(tmp_path, dfdoctor):
    p = dfdoctor("launch", "--target", "ssh://root@127.0.0.1:1", "--no-check", "--format", "json", "--",
                 "python3", "-c", "pass", cwd=tmp_path, timeout=60)
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert rep["verdict"]["state"] == "failed" and "could not be started" in rep["verdict"]["summary"]
    assert "Connection refused" in "\n".join(rep["verdict"]["evidence"])


def test_strategy_needs_a_target(tmp_path, dfdoctor):
    p = dfdoctor("launch", "--strategy", "tmux", "--", "true", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "--strategy" in p.stderr


def test_status_of_a_run_whose_target_does_not_answer(tmp_path, dfdoctor):
    run_id, run_dir = new_run(tmp_path)
    (run_dir / "spec.json").write_text(json.dumps({"run_id": run_id, "argv": ["python3", "t.py"], "cwd": "/w",
                                                   "target": "ssh://root@127.0.0.1:1", "remote_dir": "/w/r"}))
    (run_dir / "record.jsonl").write_text(json.dumps({"event": "recorder", "pid": 1, "t": time.time()}) + "\n")
    p = dfdoctor("status", "--format", "json", cwd=tmp_path, timeout=60)
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert rep["verdict"]["state"] == "unknown" and "could not be read" in rep["verdict"]["summary"]
    assert "Connection refused" in "\n".join(rep["verdict"]["evidence"])


def test_fetch_script_reads_liveness_fds_and_stacks(tmp_path, monkeypatch):
    """What a look runs on the target (target_agent, shipped with the recorder over stdin), run here through
    the same shipping on a real silent job: alive, where fd 1 goes, stacks; then dead, and its output sent."""
    import os
    import subprocess
    import sys

    from dfdoctor.agent.procfs import proc_start_time
    from dfdoctor.launch.remote import live_facts
    from dfdoctor.launch.remote_run import fetch
    from dfdoctor.targets import Target

    from dfdoctor.agent.names import RUN_ENV

    elsewhere = tmp_path / "elsewhere.log"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # a live run is proved (round 3): a "recorder" whose command line names the run folder, a job with its nonce
    recorder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(run_dir)],
                                stdin=subprocess.DEVNULL)
    with open(elsewhere, "w") as out:
        job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=out,
                               stdin=subprocess.DEVNULL, env={**os.environ, RUN_ENV: "n0nce"})
    try:
        time.sleep(0.3)
        (run_dir / "spec.json").write_text(json.dumps({"log": str(tmp_path / "train.log")}))
        events = [{"event": "recorder", "pid": recorder.pid, "start_ticks": proc_start_time(recorder.pid),
                   "nonce": "n0nce"},
                  {"event": "spawned", "pid": job.pid, "start_ticks": proc_start_time(job.pid)}]
        (run_dir / "record.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
        answer = fetch(Target(), str(run_dir), python=sys.executable, live=True)
        assert answer["recorder_alive"] and answer["job_alive"], answer
        live = live_facts(answer["live"], 3.0)
        assert live.pid == job.pid and (job.pid, 1, str(elsewhere)) in live.stdout_targets
        assert live.stacks and live.stacks[0].tool == "py-spy" and "sleep" in live.stacks[0].text
        job.kill()
        job.wait()
        answer = fetch(Target(), str(run_dir), python=sys.executable, live=True)
        assert not answer["job_alive"] and "live" not in answer and "stderr.log" in answer["files"]
    finally:
        for p in (job, recorder):
            p.kill()
            p.wait()


# py-spy's dump (--full-filenames) of tests/jobs/compile_deadlock.py, and of the same job between two holds
CYCLE = """Thread 101 (idle): "MainThread"
    ConvertFrame.__call__ (/w/deadlock_fake/torch/_dynamo/convert_frame.py:15)
    <module> (/w/compile_deadlock.py:15)
Thread 102 (idle): "drafter-0"
    Condition.wait (/usr/lib/python3.11/threading.py:324)
    Event.wait (/usr/lib/python3.11/threading.py:622)
    grad (/w/deadlock_fake/torch/autograd/__init__.py:8)
    _compile (/w/deadlock_fake/torch/_dynamo/convert_frame.py:10)
    Thread.run (/usr/lib/python3.11/threading.py:975)"""
NO_CYCLE = """Thread 101 (idle): "MainThread"
    <module> (/w/compile_cycle_passes.py:30)
Thread 102 (idle): "drafter-0"
    drafter (/w/compile_cycle_passes.py:23)
    Thread.run (/usr/lib/python3.11/threading.py:975)"""


def _agent_answer(dump: str, first: str, second: str) -> dict:
    """A target agent's `live` answer about a one-process job: its dump, and its two looks a second apart."""
    look = lambda stack: {"syscall": "202 0x0", "fds": {}, "stack": stack, "cpu_s": 0.1, "switches": 5}  # noqa: E731
    return {"pid": 101, "python": True, "cpu_s": 0.1, "stdout_targets": [], "other_logs": [],
            "stacks": [{"pid": 101, "text": dump, "tool": "py-spy"}],
            "samples": {"procs": [{"pid": 101, "ppid": 1, "cmdline": ["python3", "/w/compile_deadlock.py"],
                                   "python": True, "env": {}, "looks": [look(first), look(second)]}],
                        "locks": ""}}


def test_a_target_reads_a_lock_cycle_from_both_of_its_looks_as_here(tmp_path):
    """Issue 34: the target's reading was its one dump; it is now the local one (launch/reading.judge), the
    cycle both samples show, noted in the local copy as here. tests/test_remote_cycle.py does it for real."""
    from dfdoctor.launch.reading import CYCLE_EVENT, judge
    from dfdoctor.launch.remote import live_facts
    from dfdoctor.diagnose.look import samples_of
    from dfdoctor.run import record

    run_id, run_dir = new_run(tmp_path)
    (run_dir / "spec.json").write_text(json.dumps({"run_id": run_id, "argv": ["python3", "/w/compile_deadlock.py"],
                                                   "cwd": "/w", "target": "ssh://root@h", "remote_dir": "/w/r"}))
    run = record.load(run_dir)
    assert run.is_remote

    def read(answer: dict):
        live = live_facts(answer, 5.0)
        judge(record.load(run_dir), live, samples_of(answer["samples"]))
        return live

    passing = read(_agent_answer(CYCLE, NO_CYCLE, CYCLE))  # the dump and the last look show it, the first not
    assert passing.classified is None and not (run_dir / "launcher.jsonl").exists(), passing.classified
    assert read(_agent_answer(CYCLE, CYCLE, NO_CYCLE)).classified is None
    stuck = read(_agent_answer(NO_CYCLE, CYCLE, CYCLE))  # both looks show it: stuck, whatever the dump caught
    assert stuck.classified and stuck.classified[0] == "compile-deadlock", stuck.classified
    assert any("thread drafter-0 holds compile_lock" in line for line in stuck.cycle_detail), stuck.cycle_detail
    notes = [json.loads(line) for line in (run_dir / "launcher.jsonl").read_text().splitlines()]
    assert [e["event"] for e in notes] == [CYCLE_EVENT]
    again = read(_agent_answer(CYCLE, CYCLE, CYCLE))
    assert again.stuck_since == notes[0]["t"], "the second sighting says since when, as for a run here"
