"""Only the recorder is killed (kill -9 on its pid) while the job runs and prints. The job must not die of
its broken output pipe, its output still reaches --log, and `status` names what happened: the recorder was
killed, not the job and its recorder by a session end or a hard kill of both."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from jobs.harness import dfdoctor, job_env, kill_runs

PRINTER = """
import time
for i in range(100000):
    print("step", i, flush=True)
    time.sleep(0.05)
"""


def _events(run_dir) -> list[dict]:
    return [json.loads(ln) for ln in (run_dir / "record.jsonl").read_text().splitlines() if ln.strip()]


def _wait(pred, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _launch_printer(tmp_path, log=None) -> tuple[dict, object, dict]:
    """Launch the printer (into `log` when given): its report, its run folder, its record's events by name."""
    (tmp_path / "printer.py").write_text(PRINTER)
    p = dfdoctor("launch", "--no-check", "--watch", "3", *(["--log", str(log)] if log else []), "--format", "json",
                 "--", sys.executable, "printer.py", cwd=tmp_path, env=job_env(), timeout=120)
    run_dir = next((tmp_path / ".dfdoctor" / "runs").iterdir())
    return json.loads(p.stdout), run_dir, {e["event"]: e for e in reversed(_events(run_dir))}


def _lost_and_still_logging(run_dir, log, job_pid: int) -> None:
    assert _wait(lambda: any(e["event"] == "recorder-lost" for e in _events(run_dir)))
    size = log.stat().st_size
    assert _wait(lambda: log.stat().st_size > size + 200)  # the job goes on printing into its log
    assert _alive(job_pid)


def test_killing_only_the_recorder_leaves_the_job_running_and_is_named(tmp_path):
    log = tmp_path / "train.log"
    try:
        rep, run_dir, ev = _launch_printer(tmp_path, log)
        job_pid = rep["run"]["pid"]
        os.kill(ev["recorder"]["pid"], signal.SIGKILL)
        _lost_and_still_logging(run_dir, log, job_pid)

        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert v["state"] == "running" and "recorder was killed" in v["summary"], v
        assert v["cause"] not in ("killed-on-session-exit", "killed-by-signal"), v

        os.kill(job_pid, signal.SIGTERM)
        assert _wait(lambda: any(e["event"] == "stand-in-end" for e in _events(run_dir)))
        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert v["state"] == "unknown" and "after its recorder was killed" in v["summary"], v
    finally:
        kill_runs(tmp_path)


def test_killing_the_recorders_process_group_leaves_the_stand_in_to_name_it(tmp_path):
    """Round 3 (round 2's N15, partly fixed): the stand-in shared the recorder's process group, so `kill -9
    -PGID` took both; the job then died of its broken pipe, and the verdict blamed a session end or a hard kill
    of the job. The stand-in has a group of its own now: it notes the loss, the job runs on."""
    log = tmp_path / "train.log"
    try:
        rep, run_dir, ev = _launch_printer(tmp_path, log)
        assert os.getpgid(ev["stand-in"]["pid"]) != ev["recorder"]["pgid"]
        os.killpg(ev["recorder"]["pgid"], signal.SIGKILL)
        _lost_and_still_logging(run_dir, log, rep["run"]["pid"])
        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert v["state"] == "running" and "recorder was killed" in v["summary"], v
        assert v["cause"] not in ("killed-on-session-exit", "killed-by-signal"), v
    finally:
        kill_runs(tmp_path)


def test_a_recorder_and_stand_in_killed_at_once_are_both_named(tmp_path):
    """Both killed by pid: nothing is left to note it; the verdict names the stand-in gone too and says the job,
    had it outlived them, died of its broken pipe (not that a session end killed it)."""
    try:
        _, _, ev = _launch_printer(tmp_path)
        stand_in = ev["stand-in"]
        for pid in (ev["recorder"]["pid"], stand_in["pid"]):
            os.kill(pid, signal.SIGKILL)
        time.sleep(1.0)
        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert any(f"its stand-in (pid {stand_in['pid']}) is gone too" in e for e in v["evidence"]), v
        assert any("broken output pipe" in e for e in v["evidence"]), v
    finally:
        kill_runs(tmp_path)


def _as_launched_from_session(run_dir, sid: int) -> None:
    """The record as a launch from a session it cannot watch writes it (no session among the watched pids): pid 1's
    own (sid 1), or one whose leader lies outside this PID namespace (sid 0: CI's runner, under an exec agent that
    is pid 1 with sid 0); a test process can join neither."""
    spec_file = run_dir / "spec.json"
    spec = json.loads(spec_file.read_text())
    spec["launcher"]["sid"] = sid
    spec["watch_pids"] = [w for w in spec["watch_pids"] if w["role"] != "session"]
    spec_file.write_text(json.dumps(spec))


@pytest.mark.slow
@pytest.mark.parametrize("session", ["its own", "init's", "outside the namespace"])
def test_a_recorder_and_stand_in_killed_by_pid_are_no_session_end(tmp_path, session):
    """Round 2's N15: killed together by pid right after `launch` returned, while the launching session still runs,
    they were named killed-on-session-exit, though no session ended. CI's round 12 failure: launched from init's
    session (sid 1), no session was recorded to watch, and `launch` returning looked like the session's end;
    init's session never ends while the machine runs. Round 13's: CI's sessions have sid 0 (the leader is outside the
    PID namespace), and `launch`, which did not lead that session, returning was again taken for its end."""
    try:
        _, run_dir, ev = _launch_printer(tmp_path)
        for pid in (ev["recorder"]["pid"], ev["stand-in"]["pid"]):
            os.kill(pid, signal.SIGKILL)
        if session != "its own":
            _as_launched_from_session(run_dir, 1 if session == "init's" else 0)
        time.sleep(1.0)
        v = json.loads(dfdoctor("status", "--format", "json", cwd=tmp_path, env=job_env()).stdout)["verdict"]
        assert v["cause"] != "killed-on-session-exit", v
        assert any("no session end killed them" in e for e in v["evidence"]), v
    finally:
        kill_runs(tmp_path)
