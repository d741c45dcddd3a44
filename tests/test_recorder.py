"""The recorder on its own (`python recorder.py RUN_DIR`): append-only record, capped copies, masking, cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dfdoctor.launch import recorder

from dfdoctor.launch import rundir

RECORDER = Path(recorder.__file__)


def _record(tmp_path: Path, code: str, env: dict | None = None, **spec) -> rundir.RunRecord:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps({"run_id": "t", "argv": [sys.executable, "-c", code],
                                                    "cwd": str(tmp_path), **spec}))
    subprocess.run([sys.executable, str(RECORDER), str(run_dir)], env=env, timeout=60, check=True)
    return rundir.load(run_dir)


def test_record_is_json_lines_in_order(tmp_path):
    run = _record(tmp_path, "print('hi'); raise SystemExit(3)", log=str(tmp_path / "t.log"))
    names = [e["event"] for e in run.events]
    assert names[0] == "recorder" and names[-1] == "recorder-exit"
    assert names.index("spawned") < names.index("exit")
    assert run.exit["exit_code"] == 3 and run.exit["max_rss_kb"] > 0
    assert run.recorder["boot_id"] and run.recorder["pid_ns"].startswith("pid:")
    assert (tmp_path / "t.log").read_text() == "hi\n"
    lines = (run.dir / "record.jsonl").read_bytes().splitlines()
    assert all(json.loads(line) for line in lines), "every line is a whole JSON object"


def test_capped_copies_keep_head_and_newest_tail_but_log_gets_all(tmp_path):
    code = ("import sys\nfor i in range(70000):\n    sys.stdout.write(f'line {i:06d} ' + 'x' * 90 + '\\n')\n")
    run = _record(tmp_path, code, log=str(tmp_path / "t.log"))
    head = run.dir / "stdout.log"
    assert head.stat().st_size == recorder.HEAD_CAP
    assert run.exit["stdout_bytes"] == 70000 * 103
    assert (tmp_path / "t.log").stat().st_size == 70000 * 103, "the log is not capped, only our copies"
    tail = run.stream("stdout", 4096)
    assert tail.rstrip().endswith("line 069999 " + "x" * 90)
    total = sum(p.stat().st_size for p in run.dir.glob("stdout.*"))
    assert total <= recorder.HEAD_CAP + 2 * recorder.SEG_CAP


def test_secrets_are_masked_in_the_record(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "PWD": str(tmp_path),
           "DB_URL": "postgres://trainer:hunter22@db/x"}
    run = _record(tmp_path, "pass", env=env)
    recorded = run.spawned["env"]
    assert recorded["HF_TOKEN"] == "***" and "hunter22" not in recorded["DB_URL"]
    assert recorded["PWD"] == str(tmp_path), "harmless names stay readable"
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in (run.dir / "record.jsonl").read_text()


def test_torn_last_line_is_skipped(tmp_path):
    run = _record(tmp_path, "pass")
    with open(run.dir / "record.jsonl", "ab") as f:
        f.write(b'{"event": "exit", "exit_co')
    again = rundir.load(run.dir)
    assert [e["event"] for e in again.events] == [e["event"] for e in run.events]


def test_spawn_failure_is_recorded_not_raised(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps({"run_id": "t", "argv": ["/no/such/binary"]}))
    subprocess.run([sys.executable, str(RECORDER), str(run_dir)], timeout=60, check=True)
    ev = rundir.load(run_dir).first("spawn-failed")
    assert ev["errname"] == "ENOENT" and ev["filename"] == "/no/such/binary"


def test_recorder_imports_only_the_standard_library():
    text = RECORDER.read_text()
    assert "from dfdoctor" not in text and "from ." not in text and "import dfdoctor" not in text
    out = subprocess.run([sys.executable, "-I", "-S", "-c", f"import runpy; runpy.run_path({str(RECORDER)!r})"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_shipped_on_stdin_detaches_itself_and_survives_the_hangup(tmp_path):
    """How a remote target can use it: `python3 - --detach DIR SPEC < recorder.py` in a pty session that
    hangs up as soon as the command returns; the job keeps running and logging."""
    import os
    import shlex
    import time

    from jobs.harness import JOBS, kill_runs, wait_for
    from test_launch_detach import _pty_session

    run_dir = tmp_path / "remote-run"
    spec = json.dumps({"run_id": "r", "argv": [sys.executable, str(JOBS / "healthy.py"), "20"],
                       "cwd": str(tmp_path), "log": str(tmp_path / "t.log")})
    try:
        _pty_session(f"{shlex.quote(sys.executable)} - --detach {run_dir} {shlex.quote(spec)} "
                     f"< {shlex.quote(str(RECORDER))}")
        assert wait_for(lambda: rundir.load(run_dir).spawned is not None, timeout=10)
        time.sleep(1.5)
        run = rundir.load(run_dir)
        assert run.recorder_alive() and run.job_alive(), run.events[-3:]
        assert run.recorder["sid"] != os.getsid(0) and run.recorder["sid"] != run.recorder["pid"], \
            "a session of its own, whose leader is gone (it can never regain a terminal)"
        size = (tmp_path / "t.log").stat().st_size
        assert wait_for(lambda: (tmp_path / "t.log").stat().st_size > size, timeout=3)
    finally:
        kill_runs(tmp_path)
