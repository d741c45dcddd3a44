"""The gate is right both ways (issue 31): a line behind a wrapper is read through and rehearsed, so a missing log
folder fails it (exit 1, observed); a line that works by hand is never failed (exit 0), and what the rehearsal
could not prove harmless is a warning that says what was not run; a line that stops names the real cause."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.shell import quote
from infra.fixtures import Infra, docker_infra, infra, kill_naming  # noqa: F401
from infra.slurm_fixtures import slurm  # noqa: F401
from support.in_process import run_here

TRAIN = "import time\nfor i in range(400):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


@pytest.fixture
def work():
    d = Path(f"/tmp/dfd-fid-{uuid.uuid4().hex[:8]}")
    d.mkdir()
    (d / "t.py").write_text(TRAIN)
    yield d
    kill_naming(str(d))
    shutil.rmtree(d, ignore_errors=True)


def _check(dfdoctor, line: str, cwd: Path, *extra: str, env: dict | None = None):
    p = dfdoctor("check", "--only", "launch.path", "--shell-command", line, "--format", "json", *extra, cwd=cwd,
                 env=env, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    rec = [c for c in json.loads(p.stdout)["checks"] if c["id"] == "launch.path"][0]
    return p, rec


def _rows(rec: dict) -> list[dict]:
    return rec.get("findings") or [rec]


@pytest.mark.parametrize("wrapper", ["taskset -c 0", "stdbuf -o L", "env -u X", "env -C /tmp", "flock {d}/lock",
                                     "nice -n 5", "timeout 60", "ionice -c 2 -n 7", "chrt -o 0", "srun -N 1"])
def test_a_line_behind_a_wrapper_is_rehearsed_and_fails_on_a_missing_log_folder(dfdoctor, work, wrapper):
    line = f"{wrapper.format(d=work)} python3 -u {work}/t.py > {work}/no-such-folder/t.log 2>&1 &"
    p, rec = _check(dfdoctor, line, work)
    assert p.returncode == 1 and rec["cause"] == causes.LOG_DIR_MISSING and rec["basis"] == "observed", rec
    assert sorted(f.name for f in work.iterdir()) == ["t.py"]  # flock's lock file was renamed, and removed


def test_a_launcher_that_calls_main_is_a_warning_not_a_failure(dfdoctor, work):
    (work / "launch.sh").write_text("#!/bin/bash\nmain() {\n  cd \"$(dirname \"$0\")\"\n"
                                    "  nohup python3 -u t.py > t.log 2>&1 &\n}\nmain \"$@\"\n")
    p = dfdoctor("check", "--only", "launch.path", "--launcher", "launch.sh", "--format", "json", cwd=work)
    rec = [c for c in json.loads(p.stdout)["checks"] if c["id"] == "launch.path"][0]
    assert p.returncode == 0 and rec["status"] == "warn", rec
    assert any("not rehearsed" in r["summary"] and "function" in r["summary"] for r in _rows(rec)), rec


def test_a_for_loop_starting_ranks_is_a_warning_not_a_failure(dfdoctor, work):
    line = f"cd {work} && for r in 0 1; do nohup python3 -u t.py --rank $r > t.$r.log 2>&1 & done"
    p, rec = _check(dfdoctor, line, work)
    assert p.returncode == 0 and rec["status"] == "warn", rec
    assert any("not rehearsed" in r["summary"] and "for" in r["summary"] for r in _rows(rec)), rec
    assert sorted(f.name for f in work.iterdir()) == ["t.py"]


def test_a_trap_is_a_warning_beside_a_rehearsed_pass(dfdoctor, work):
    line = f"trap 'rm -f {work}/t.py' EXIT; cd {work} && nohup setsid -f python3 -u t.py </dev/null >> t.log 2>&1"
    p, rec = _check(dfdoctor, line, work)
    assert p.returncode == 0 and (work / "t.py").exists(), rec
    statuses = {r["status"] for r in _rows(rec)}
    assert statuses == {"ok", "warn"}, rec
    assert any(r["summary"].startswith("not rehearsed: trap") for r in _rows(rec)), rec


@pytest.mark.slow
def test_tee_append_over_ssh_works_and_leaves_the_log_alone(dfdoctor, work, infra):
    (work / "train.log").write_text("the last run\n")
    line = f"ssh root@dfdoctor-host 'cd {work} && nohup python3 -u t.py 2>&1 | tee -a train.log >/dev/null &'"
    p, rec = _check(dfdoctor, line, work, env=infra.env())
    assert p.returncode == 0 and rec["status"] != "fail", rec
    assert (work / "train.log").read_text() == "the last run\n"
    assert sorted(f.name for f in work.iterdir()) == ["t.py", "train.log"]


@pytest.mark.slow
def test_ssh_f_is_not_failed(dfdoctor, work, infra):
    line = f"ssh -f root@dfdoctor-host 'cd {work} && nohup python3 -u t.py > t.log 2>&1'"
    p, rec = _check(dfdoctor, line, work, env=infra.env())
    assert p.returncode == 0 and rec["status"] != "fail", rec


@pytest.mark.slow
def test_proc_1_fd_1_in_docker_is_not_failed(dfdoctor, docker_infra, tmp_path):
    name = f"dfd-fid-{uuid.uuid4().hex[:8]}"
    ws = docker_infra.docker_workspace / name
    ws.mkdir()
    (ws / "t.py").write_text(TRAIN)
    try:
        line = (f"docker exec {docker_infra.docker_name} sh -c "
                f"{quote(f'nohup python3 -u /workspace/{name}/t.py > /proc/1/fd/1 2>&1 &')}")
        p, rec = _check(dfdoctor, line, tmp_path, env=docker_infra.env())
        assert p.returncode == 0 and rec["status"] != "fail", rec
        assert any("/proc/1/fd/1" in r["summary"] for r in _rows(rec) if r["status"] == "warn"), rec
    finally:
        kill_naming(name)
        shutil.rmtree(ws, ignore_errors=True)


def test_a_taken_tmux_name_is_named_as_the_cause(dfdoctor, work):
    name = f"dfd{uuid.uuid4().hex[:6]}"
    subprocess.run(["tmux", "new", "-d", "-s", name, "sleep 60"], check=True)
    try:
        line = f"tmux new -d -s {name} 'python3 -u {work}/t.py > {work}/t.log 2>&1'"
        p, rec = _check(dfdoctor, line, work)
        assert p.returncode == 1 and rec["basis"] == "observed", rec
        assert f"duplicate session: {name}" in rec["summary"], rec
    finally:
        subprocess.run(["tmux", "kill-session", "-t", f"={name}"])


@pytest.mark.parametrize("command", [["./launch.sh"], ["bash", "launch.sh"]])
def test_a_launcher_given_as_the_command_is_rehearsed(dfdoctor, work, command):
    (work / "launch.sh").write_text("#!/bin/bash\ncd \"$(dirname \"$0\")\"\nnohup python3 -u t.py > logs/t.log 2>&1 &\n")
    (work / "launch.sh").chmod(0o755)
    p = dfdoctor("check", "--only", "launch.path", "--format", "json", "--", *command, cwd=work, timeout=120)
    rec = [c for c in json.loads(p.stdout)["checks"] if c["id"] == "launch.path"][0]
    assert p.returncode == 1 and rec["cause"] == causes.LOG_DIR_MISSING and rec["basis"] == "observed", rec
    assert sorted(f.name for f in work.iterdir()) == ["launch.sh", "t.py"]


@pytest.mark.slow
def test_env_before_sbatch_is_a_slurm_submission_with_that_env(slurm, tmp_path, dfdoctor):
    """`env SBATCH_PARTITION=x sbatch job.sbatch`: read through `env` to sbatch, which is asked with that variable
    (it was passed as OK, and Slurm then failed the job)."""
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\npython3 -c 'print(1)'\n")
    p = dfdoctor("check", "--only", "slurm.*", "--format", "json", "--", "env", "SBATCH_PARTITION=nosuch-dfd",
                 "sbatch", "job.sbatch", cwd=tmp_path, timeout=200)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and "invalid partition" in doc["verdict"]["summary"], doc["verdict"]
    assert any(c["id"] == "slurm.submission" for c in doc["checks"])


def test_a_check_whose_line_was_not_rehearsed_in_full_is_not_called_ok(dfdoctor, work):
    """What was not run is never a pass: a line whose trap was not rehearsed, or a line that could not be
    rehearsed at all, is `unknown` with a headline saying so, not "OK ... 1 warning(s)"; nothing was found wrong,
    so the exit code stays 0 (1 under --fail-on warn). A line rehearsed whole is still OK."""
    whole = f"cd {work} && nohup setsid -f python3 -u t.py </dev/null >> t.log 2>&1"
    part = f"trap 'true' EXIT; {whole}"
    unreachable = f"ssh root@no-such-host.invalid 'cd {work} && nohup python3 -u t.py > t.log 2>&1 &'"
    text = ("--format", "text", "--format", "json", "--output", str(work / "r.json"))
    p, _ = _check(dfdoctor, whole, work)
    assert p.returncode == 0 and json.loads(p.stdout)["verdict"]["state"] == "ok", p.stdout
    for line, said in ((part, "Part of your launch line was not rehearsed (trap"),
                       (unreachable, "Your launch line was not rehearsed (")):
        # the first line's text through the console script; the others, and each -q, through the same entry here
        args = ("check", "--only", "launch.path", "--shell-command", line, *text)
        p = dfdoctor(*args, cwd=work, timeout=120) if line == part else run_here(*args, cwd=work)
        v = json.loads((work / "r.json").read_text())["verdict"]
        assert p.returncode == 0 and v["state"] == "unknown" and v["summary"].startswith(said), (p.stdout, v)
        head = p.stdout.splitlines()
        assert head[0] == "dfdoctor check: UNKNOWN" and said in " ".join(head[1:3]), p.stdout
        assert "OK" not in head[0]
        p = run_here("check", "-q", "--fail-on", "warn", "--only", "launch.path", "--shell-command", line, cwd=work)
        assert p.returncode == 1, p.stdout


def test_a_job_a_slow_wrapper_starts_late_is_not_failed(dfdoctor, work):
    # the job starts 2.5 s after the line returned (as `ssh -f` starts it on a loaded machine): a process of the
    # line still runs meanwhile, so the rehearsal waits for it instead of saying the job never started
    slow = work / "slow"
    slow.mkdir()
    (slow / "python3").write_text(f"#!/bin/sh\nsleep 2.5\nexec {shutil.which('python3')} \"$@\"\n")
    (slow / "python3").chmod(0o755)
    line = f"cd {work} && PATH={slow}:$PATH nohup python3 -u t.py > t.log 2>&1 &"
    p, rec = _check(dfdoctor, line, work)
    assert p.returncode == 0 and rec["status"] != "fail", rec
    assert not any("not rehearsed" in r["summary"] or "had not started" in r["summary"] for r in _rows(rec)), rec
    assert sorted(f.name for f in work.iterdir()) == ["slow", "t.py"]
