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
