"""The recorder on its own (`python AGENT recorder RUN_DIR`): append-only record, capped copies, masking, cost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.agent import procfs, record, ship
from dfdoctor.run import record as run_record

AGENT = ship.AGENT_DIR


def _record(tmp_path: Path, code: str, env: dict | None = None, **spec) -> run_record.RunRecord:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps({"run_id": "t", "argv": [sys.executable, "-c", code],
                                                    "cwd": str(tmp_path), **spec}))
    subprocess.run(ship.here_argv(sys.executable, "recorder", str(run_dir)), env=env, timeout=60, check=True)
    return run_record.load(run_dir)


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
    assert head.stat().st_size == record.HEAD_CAP
    assert run.exit["stdout_bytes"] == 70000 * 103
    assert (tmp_path / "t.log").stat().st_size == 70000 * 103, "the log is not capped, only our copies"
    tail = run.stream("stdout", 4096)
    assert tail.rstrip().endswith("line 069999 " + "x" * 90)
    total = sum(p.stat().st_size for p in run.dir.glob("stdout.*"))
    assert total <= record.HEAD_CAP + 2 * record.SEG_CAP


def test_secrets_are_masked_in_the_record(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "PWD": str(tmp_path),
           "DB_URL": "postgres://trainer:hunter22@db/x"}
    run = _record(tmp_path, "pass", env=env)
    recorded = run.spawned["env"]
    # round 3: only what a diagnosis reads is kept (docs/files.md), never a secret-named one even if it matched
    assert "HF_TOKEN" not in recorded and "DB_URL" not in recorded and "PWD" not in recorded
    assert recorded["PATH"] == "/usr/bin:/bin", "what a diagnosis reads stays readable"
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in (run.dir / "record.jsonl").read_text()


def test_torn_last_line_is_skipped(tmp_path):
    run = _record(tmp_path, "pass")
    with open(run.dir / "record.jsonl", "ab") as f:
        f.write(b'{"event": "exit", "exit_co')
    again = run_record.load(run.dir)
    assert [e["event"] for e in again.events] == [e["event"] for e in run.events]


def test_spawn_failure_is_recorded_not_raised(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps({"run_id": "t", "argv": ["/no/such/binary"]}))
    subprocess.run(ship.here_argv(sys.executable, "recorder", str(run_dir)), timeout=60, check=True)
    ev = run_record.load(run_dir).first("spawn-failed")
    assert ev["errname"] == "ENOENT" and ev["filename"] == "/no/such/binary"


def test_recorder_imports_only_the_standard_library():
    for path in ship.shipped_files():
        text = path.read_text()
        assert "import dfdoctor" not in text and "from . " not in text, path.name
        assert not re.findall(r"from dfdoctor\.(?!agent\b)", text), path.name
    # no site-packages, no dfdoctor: the agent's folder alone loads the recorder (which then asks for a run folder)
    out = subprocess.run([sys.executable, "-I", "-S", str(AGENT), "recorder"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2 and out.stderr.startswith("usage: recorder"), out.stderr


def test_shipped_on_stdin_detaches_itself_and_survives_the_hangup(tmp_path):
    """How a remote target uses it: `python3 agent.pyz recorder --detach DIR SPEC` (the zip ship.sh keeps there)
    in a pty session that hangs up as soon as the command returns; the job keeps running and logging."""
    import os
    import shlex
    import time

    from jobs.harness import JOBS, kill_runs, wait_for
    from test_launch_detach import _pty_session

    shipped = tmp_path / "agent.pyz"
    shipped.write_bytes(ship.bundle("recorder"))
    run_dir = tmp_path / "remote-run"
    spec = json.dumps({"run_id": "r", "argv": [sys.executable, str(JOBS / "healthy.py"), "20"],
                       "cwd": str(tmp_path), "log": str(tmp_path / "t.log")})
    try:
        _pty_session(f"{shlex.quote(sys.executable)} {shlex.quote(str(shipped))} recorder --detach {run_dir} "
                     f"{shlex.quote(spec)} </dev/null")
        assert wait_for(lambda: run_record.load(run_dir).spawned is not None, timeout=10)
        time.sleep(1.5)
        run = run_record.load(run_dir)
        assert run.recorder_alive() and run.job_alive(), run.events[-3:]
        assert run.recorder["sid"] != os.getsid(0) and run.recorder["sid"] != run.recorder["pid"], \
            "a session of its own, whose leader is gone (it can never regain a terminal)"
        size = (tmp_path / "t.log").stat().st_size
        assert wait_for(lambda: (tmp_path / "t.log").stat().st_size > size, timeout=3)
    finally:
        kill_runs(tmp_path)


# Secrets of each kind the recorder must never write down: env values, `--name VALUE`, `NAME=VALUE`, a DSN.
WANDB = "0123456789abcdef0123456789abcdef01234567"
HF_ARG = "hfargvalue-9f8e7d6c5b4a39281706"
GH_PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
DB_PW = "s3cretDBpassw0rd"
JOB = ("import os, sys, time\n"
       "print('argv', sys.argv[1:], flush=True)\n"
       "print('wandb', os.environ['WANDB_API_KEY'], flush=True)\n"
       "sys.stderr.write('half ' + sys.argv[2][:10]); sys.stderr.flush(); time.sleep(0.3)\n"
       "sys.stderr.write(sys.argv[2][10:] + ' joined\\n')\n")


def _run_with_secrets(tmp_path: Path, agent: Path) -> Path:
    run_dir = tmp_path / "run"
    spec = {"run_id": "s", "argv": [sys.executable, "-c", JOB, "--hf-token", HF_ARG, f"GH_PAT={GH_PAT}",
                                    f"postgres://trainer:{DB_PW}@db:5432/x"], "cwd": str(tmp_path),
            "log": str(tmp_path / "t.log")}
    env = {"PATH": "/usr/bin:/bin", "WANDB_API_KEY": WANDB}
    subprocess.run([sys.executable, str(agent), "recorder", str(run_dir), "-"], input=json.dumps(spec).encode(),
                   env=env, timeout=60, check=True)
    return run_dir


def test_the_record_is_masked_by_the_rules_of_every_output(tmp_path):
    """spec.json, record.jsonl and the stream copies hold argv and environment masked as redact masks a
    report: `--hf-token VALUE`, GH_PAT=ghp_..., a DSN's password, the environment's secrets, even when the job
    prints them (one secret written in two pieces included). The user's own log is theirs: left as written."""
    run_dir = _run_with_secrets(tmp_path, AGENT)
    written = {p.name: p.read_text(errors="replace") for p in run_dir.iterdir() if p.is_file()}
    assert {"spec.json", "record.jsonl", "stdout.log", "stderr.log"} <= set(written)
    for name, text in written.items():
        for secret in (WANDB, HF_ARG, GH_PAT, DB_PW, HF_ARG[:10] + HF_ARG[10:]):
            assert secret not in text, (name, secret)
    run = run_record.load(run_dir)
    assert run.exit["exit_code"] == 0 and "joined" in written["stderr.log"]
    assert run.spawned["argv"][3:5] == ["--hf-token", "***"]
    assert "***" in written["stdout.log"] and "wandb ***" in written["stdout.log"]
    assert not (run_dir / "spec.in").exists()
    assert HF_ARG in (tmp_path / "t.log").read_text(), "the job's own log is not ours to change"


def test_the_recorder_keeps_no_rules_of_its_own():
    """One set of rules: the recorder masks with the agent's mask module, nothing else of it has patterns but
    loop_lines' one pattern of a number (a line's shape, taken from a line masked by mask.py first). A secret's
    name (`TOKEN`) is mask.py's alone; TIKTOKEN_CACHE_DIR, a variable the record keeps, is not one."""
    secret_name = re.compile(r"(?<![A-Z])TOKEN")
    for path in ship.shipped_files():
        text = path.read_text()
        if path.name == "loop_lines.py":
            assert text.count("re.compile") == 1 and "NUMBER = re.compile(" in text and not secret_name.search(text)
        elif path.name != "mask.py":
            assert "import re\n" not in text and "re.compile" not in text and not secret_name.search(text), path.name


def test_a_copy_without_the_rules_writes_nothing_in_clear(tmp_path):
    """An agent copied without its masking rules (never done, but a bug could) hides every string rather than
    keep one unmasked."""
    import shutil

    lone = tmp_path / "elsewhere" / "agent"
    shutil.copytree(AGENT, lone, ignore=shutil.ignore_patterns("__pycache__"))
    (lone / "mask.py").unlink()
    run_dir = _run_with_secrets(tmp_path, lone)
    for p in run_dir.iterdir():
        text = p.read_text(errors="replace")
        for secret in (WANDB, HF_ARG, GH_PAT, DB_PW):
            assert secret not in text, (p.name, secret)
    assert run_record.load(run_dir).first("masking-unavailable") is not None


def test_the_shipped_zip_holds_the_same_rules(tmp_path):
    shipped = tmp_path / "elsewhere" / "agent.pyz"
    shipped.parent.mkdir()
    shipped.write_bytes(ship.bundle("recorder"))
    run_dir = _run_with_secrets(tmp_path, shipped)
    run = run_record.load(run_dir)
    assert run.first("masking-unavailable") is None
    assert run.spawned["argv"][3:5] == ["--hf-token", "***"]
    for p in run_dir.iterdir():
        assert GH_PAT not in p.read_text(errors="replace")


# What the interpreter itself decides is the oracle: each case's Python reports whether its stdout is
# block-buffered, and buffers_stdout must read the same from the outside (its argv, its environment, its fd 1).
_SAYS_IF_BUFFERED = ("import io, sys, time; open(sys.argv[1], 'w').write(str(isinstance(sys.stdout.buffer, "
                     "io.BufferedWriter) and not sys.stdout.line_buffering)); time.sleep(60)")


@pytest.mark.parametrize("before, after, unbuffered_env", [
    (["-c"], [], None),
    (["-u", "-c"], [], None),
    (["-uc"], [], None),
    (["-Bu", "-c"], [], None),
    (["-W", "ignore", "-u", "-c"], [], None),
    (["-X", "dev", "-u", "-c"], [], None),
    (["-Wdefault::RuntimeWarning", "-c"], [], None),  # a 'u' inside an option's value
    (["-Xutf8", "-c"], [], None),
    (["-c"], ["-u"], None),  # the program's own -u
    (["--check-hash-based-pycs", "always", "-u", "-c"], [], None),
    (["-c"], [], "1"),
    (["-c"], [], ""),
])
def test_buffered_stdout_is_read_as_the_interpreter_decides(tmp_path, before, after, unbuffered_env):
    said = tmp_path / "said"
    argv = [sys.executable, *before, _SAYS_IF_BUFFERED, str(said), *after]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered_env is not None:
        env["PYTHONUNBUFFERED"] = unbuffered_env
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not said.exists() or not said.read_text():
            assert child.poll() is None and time.monotonic() < deadline, "the interpreter never said"
            time.sleep(0.05)
        assert procfs.buffers_stdout(child.pid, argv, env) == (said.read_text() == "True")
    finally:
        child.kill()
        child.wait()


def test_a_new_progress_line_is_in_the_heartbeat_soon_not_at_the_next_tick(tmp_path):
    """Issue 45: the watch says `running` on the pace and loop the heartbeat shows; a line waited for the next
    tick (up to a second). The job prints a line, then reads the heartbeat until it counts that line: each line
    printed right after a heartbeat is in the next one within NEWS_S (plus a loaded machine's delay), not TICK_S."""
    from dfdoctor.agent import recorder
    beat = tmp_path / "run" / "heartbeat"
    code = (f"import json, time\ndelays = []\nfor k in range(1, 7):\n    print('step', k, flush=True)\n"
            f"    t = time.monotonic()\n    while time.monotonic() - t < 5:\n        try:\n"
            f"            if json.load(open({str(beat)!r})).get('progress_lines', 0) >= k:\n                break\n"
            f"        except (OSError, ValueError):\n            pass\n        time.sleep(0.01)\n"
            f"    delays.append(time.monotonic() - t)\nprint('delays', json.dumps(delays), flush=True)\n")
    run = _record(tmp_path, code)
    said = [ln for ln in run.stream("stdout", 4096).splitlines() if ln.startswith("delays ")]
    delays = json.loads(said[0].split(" ", 1)[1])
    later = sorted(delays[1:])  # the first line is in the beat that notes the first output
    assert later[len(later) // 2] < 0.75 * recorder.TICK_S, delays
