"""`launch`/`status --target` without the target infrastructure: a target that does not answer, bad usage."""

from __future__ import annotations

import json
import time

from doctor import rundir


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
    run_id, run_dir = rundir.new_run(tmp_path)
    (run_dir / "spec.json").write_text(json.dumps({"run_id": run_id, "argv": ["python3", "t.py"], "cwd": "/w",
                                                   "target": "ssh://root@127.0.0.1:1", "remote_dir": "/w/r"}))
    (run_dir / "record.jsonl").write_text(json.dumps({"event": "recorder", "pid": 1, "t": time.time()}) + "\n")
    p = dfdoctor("status", "--format", "json", cwd=tmp_path, timeout=60)
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert rep["verdict"]["state"] == "unknown" and "could not be read" in rep["verdict"]["summary"]
    assert "Connection refused" in "\n".join(rep["verdict"]["evidence"])
