"""Round 4 of the hostile review, the reader's half (issue 40, shared/REHEARSAL.md): ways a line runs a value as
code with no `$(` in sight (S5: `declare -i`, a substring's offset, an array's index, PS4 under xtrace, `printf
-v`, `test -v`, `${x@P}`, `${!x}`), a file every shell sources (S6: BASH_ENV), a pure-looking lookup that changes
the machine (S4: `hostname NAME`), and tmux's spellings of a session's name (S11). The second wall is switched off
here: the reader alone must not run them (the wall holds what it misses, tests/test_rehearse_wall_mounts.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.rehearse import judge, prove, rewrite, wall
from dfdoctor.rehearse.runner import rehearse
from dfdoctor.shell import parse, quote
from infra.fixtures import docker_infra, infra, kill_naming  # noqa: F401

TRAIN = "import time\nfor i in range(400):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"
JOB = "nohup python3 -u t.py > t.log 2>&1 &"
HOOK = "$(touch PWNED)"


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setattr(wall, "why_not_here", lambda: "switched off by the test")
    (tmp_path / "t.py").write_text(TRAIN)
    return tmp_path


@pytest.mark.parametrize("setup", [
    f"declare -i N='a[{HOOK}]'",
    f"S='a[{HOOK}]'; echo ${{RANDOM:S:1}}",
    f"S='a[{HOOK}]'; echo ${{RANDOM:$S:1}}",
    f"I='a[{HOOK}]'; echo ${{a[I]}}",
    f"PS4='+{HOOK}'; set -x",
    f"printf -v 'a[{HOOK}]' x",
    f"test -v 'a[{HOOK}]'",
    f"P='{HOOK}'; echo ${{P@P}}",
    f"R='a[{HOOK}]'; echo ${{!R}}",
    f"I='a[{HOOK}]'; declare -a A=([I]=1)",
], ids=["declare-i", "substring-offset", "substring-offset-expanded", "array-index", "ps4-xtrace", "printf-v", "test-v",
        "prompt", "indirect", "compound-index"])
def test_a_value_run_as_code_is_not_run(work, setup):
    """Without a wall here, a line found hiding code is not rehearsed at all; with one, the rest of it is."""
    r = rehearse(f"{setup}; {JOB}", cwd=str(work))
    assert not (work / "PWNED").exists(), judge.facts(r)
    assert "no wall can stand on this machine" in r.unobservable and not r.started, judge.facts(r)


@pytest.mark.parametrize("setup", ["declare -a A=(1 2)", "A=(1)", "A+=(\"a b\" c)"])
def test_an_array_assignment_is_one_word_and_the_line_stays_a_line(work, setup):
    """`declare -a A=(1)` was read as `A=`, `(`, `1`, `)`: skipped, it left `:)` behind, a syntax error that made
    the rehearsal fail where the user's line works. An array without indexes runs no code: it is rehearsed."""
    plan = rewrite.plan(f"{setup}; {JOB}", "t0")
    assert subprocess.run(["bash", "-n", "-c", plan.line]).returncode == 0, plan.line
    r = rehearse(f"{setup}; {JOB}", cwd=str(work))
    assert r.started, judge.facts(r)


def test_bash_env_is_not_sourced(work, monkeypatch):
    """S6: `export BASH_ENV=envrc.sh; bash -c '…'` sourced the file for real; also one dfdoctor inherited."""
    (work / "envrc.sh").write_text("touch PWNED\n")
    r = rehearse(f"export BASH_ENV=envrc.sh; bash -c {quote(JOB)}", cwd=str(work))
    assert not (work / "PWNED").exists(), judge.facts(r)
    assert "BASH_ENV" in r.unobservable, judge.facts(r)
    monkeypatch.setenv("BASH_ENV", str(work / "envrc.sh"))
    r = rehearse(f"bash -c {quote(JOB)}", cwd=str(work))
    assert not (work / "PWNED").exists() and r.started, judge.facts(r)


def test_hostname_and_date_are_pure_only_when_they_read():
    """S4: `$(hostname NAME)` counted as pure and renamed the host (as root); `date -s` would set the clock."""
    changes = ["hostname NAME", "hostname -b NAME", "date -s 2020-01-01", "date 010100002020"]
    reads = ["hostname", "hostname -s", "date +%F", "date -u +%s"]
    assert [t for t in changes + reads if prove.harmless_text(t)] == reads


@pytest.mark.parametrize("spelling", ["-ds {name}", "-d -s{name}", "-ds{name}"])
def test_every_spelling_of_a_taken_tmux_name_is_probed(work, spelling):
    """S11: `tmux new -ds NAME` (clustered) and `-sNAME` (glued) missed the duplicate-session probe."""
    name = f"dfd{uuid.uuid4().hex[:6]}"
    _user_tmux_session(name)
    try:
        r = rehearse(f"tmux new {spelling.format(name=name)} {quote(f'python3 -u {work}/t.py > {work}/t.log 2>&1')}",
                     cwd=str(work))
        assert f"duplicate session: {name}" in r.output, judge.facts(r)
        assert not r.started, judge.facts(r)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", f"={name}"])


def _user_tmux_session(name: str) -> None:
    """A session of the user's own tmux server (its start is retried: under load, or while another test's server
    exits, `tmux new` may fail once)."""
    deadline = time.monotonic() + 20
    while subprocess.run(["tmux", "has-session", "-t", f"={name}"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "tmux could not start a session"
        if subprocess.run(["tmux", "new", "-d", "-s", name, "sleep 60"], capture_output=True).returncode != 0:
            time.sleep(0.2)


def test_the_private_tmux_server_reads_no_configuration(work, monkeypatch):
    """A user's ~/.tmux.conf may run commands (`run-shell`): the rehearsal's private server starts with -f /dev/null."""
    home = work / "home"
    home.mkdir()
    (home / ".tmux.conf").write_text(f"run-shell 'touch {work}/PWNED'\n")
    monkeypatch.setenv("HOME", str(home))
    r = rehearse(f"tmux new -d {quote(f'python3 -u {work}/t.py > {work}/t.log 2>&1')}", cwd=str(work))
    assert r.started, judge.facts(r)
    assert not (work / "PWNED").exists(), judge.facts(r)


def test_the_tmux_options_are_read_as_tmux_reads_them():
    plan = rewrite.plan("tmux new -dsNAME -c /w python3 t.py", "t0")
    assert "sh NAME" in plan.line and "-f /dev/null" in plan.line, plan.line
    assert parse(plan.line)  # still a line a shell reads


@pytest.fixture
def ssh_work(infra, work, monkeypatch):  # noqa: F811
    """A folder at the ssh host (this machine's sshd), the infrastructure's ssh configuration, no wall here."""
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.ssh_config))
    return work


def _remote(work) -> str:
    return quote(f"cd {work} && {JOB}")


@pytest.mark.slow
def test_ssh_runs_no_local_command_of_the_users_options(ssh_work):
    """S3: `ssh -o PermitLocalCommand=yes -o LocalCommand=…` ran it during a check: now off, and said so."""
    r = rehearse(f"ssh -o PermitLocalCommand=yes -o 'LocalCommand=touch {ssh_work}/PWNED' root@dfdoctor-host "
                 f"{_remote(ssh_work)}", cwd=str(ssh_work))
    assert r.started, judge.facts(r)
    assert not (ssh_work / "PWNED").exists(), judge.facts(r)
    assert any("PermitLocalCommand=no" in why for _, why in r.plan.not_rehearsed), r.plan.not_rehearsed


@pytest.mark.slow
@pytest.mark.parametrize("how", ["proxy", "known-hosts", "match-exec", "match-exec-equals", "config-proxy"])
def test_an_ssh_hop_that_would_run_a_local_command_is_not_rehearsed(ssh_work, infra, how):  # noqa: F811
    """S3: `-o ProxyCommand=…` ran even when the report said "read, not run"; so would a KnownHostsCommand, or a
    `-F` file's `Match exec` (which ssh runs while reading it, -G too) or its ProxyCommand."""
    hook = f"touch {ssh_work}/PWNED"
    cfg = ssh_work / "user_ssh_config"
    proxy = "ProxyCommand=sh -c " + quote(hook + "; exec nc %h %p")
    known = "KnownHostsCommand=/bin/sh -c " + quote(hook)
    opts = {"proxy": f"-o {quote(proxy)}", "known-hosts": f"-o {quote(known)}",
            "match-exec": f"-F {cfg}", "match-exec-equals": f"-F {cfg}", "config-proxy": f"-F {cfg}"}[how]
    first = {"match-exec": f"Match exec \"{hook}\"\n  User root\n",
             "match-exec-equals": f"Match=exec \"{hook}\"\n  User root\n",  # ssh reads it as `Match exec`
             "config-proxy": f"Host dfdoctor-host\n  ProxyCommand sh -c '{hook}; exec nc %h %p'\n"}.get(how, "")
    cfg.write_text(first + infra.ssh_config.read_text())
    r = rehearse(f"ssh {opts} root@dfdoctor-host {_remote(ssh_work)}", cwd=str(ssh_work))
    assert not (ssh_work / "PWNED").exists(), judge.facts(r)
    assert r.unobservable and "ssh" in r.unobservable and not r.started, judge.facts(r)


@pytest.mark.slow
def test_no_ssh_of_a_check_runs_the_local_command_of_a_lines_config_file(ssh_work, infra, dfdoctor):  # noqa: F811
    """A `-F` file with `PermitLocalCommand yes` + `LocalCommand`: the rehearsal's ssh had it off, but the
    connection the other checks share (and target.reachable's) read the same file and ran it on this machine."""
    cfg = ssh_work / "user_ssh_config"
    cfg.write_text(f"Host dfdoctor-host\n  PermitLocalCommand yes\n  LocalCommand touch {ssh_work}/PWNED\n"
                   + infra.ssh_config.read_text())
    p = dfdoctor("check", "--", "ssh", "-F", str(cfg), "root@dfdoctor-host", f"cd {ssh_work} && {JOB}",
                 env=infra.env(), timeout=180)
    assert "target.reachable" in p.stdout and p.returncode in (0, 1), p.stdout + p.stderr
    assert not (ssh_work / "PWNED").exists(), p.stdout


@pytest.fixture
def shm_folder():
    folder = Path("/dev/shm") / f"dfd-rd4-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_log_under_dev_shm_is_renamed_and_a_device_is_not(work, shm_folder):
    """S1: `> /dev/shm/train.log` was taken for a device by its /dev/ prefix: neither renamed nor walled, the last
    run's log was replaced. The hop says what a path under /dev is (stat there)."""
    log = shm_folder / "train.log"
    log.write_text("the previous run's log\n")
    r = rehearse(f"nohup python3 -u t.py > {log} 2>&1 &", cwd=str(work))
    assert r.started and f"{log}.dfdoctor-rh-" in r.plan.line, judge.facts(r)
    assert log.read_text() == "the previous run's log\n"
    assert sorted(p.name for p in shm_folder.iterdir()) == ["train.log"]
    r = rehearse("nohup python3 -u t.py > /dev/ptmx 2>&1 &", cwd=str(work))
    assert "> /dev/ptmx " in r.plan.line, r.plan.line  # a device there: written as the line would


def test_a_read_write_redirect_is_a_write(work):
    """S2: `1<>train.log` was not counted as a write: the log was overwritten in place."""
    (work / "train.log").write_text("the previous run's log\n")
    r = rehearse("nohup python3 -u t.py 1<>train.log 2>&1 &", cwd=str(work))
    assert r.started, judge.facts(r)
    assert (work / "train.log").read_text() == "the previous run's log\n"


def test_screen_logging_to_the_log_is_not_log_elsewhere(work):
    """R7: `screen -L -Logfile F` was failed as log-elsewhere though screen writes the job's output there."""
    name = f"dfd{uuid.uuid4().hex[:6]}"
    r = rehearse(f"screen -L -Logfile train.log -dmS {name} python3 -u t.py", cwd=str(work))
    assert r.started, judge.facts(r)
    assert causes.LOG_ELSEWHERE not in [f.cause for f in judge.findings(r, expected_log="train.log")], judge.facts(r)


@pytest.mark.slow
def test_docker_proc_1_fd_1_is_not_blamed_on_dfdoctors_dev_null(docker_infra):  # noqa: F811
    """R4: `> /proc/1/fd/1` in a docker container (the container's log) was failed as log-elsewhere, blaming the
    /dev/null the rehearsal wrote to in its place."""
    name = f"dfd-rd4-{uuid.uuid4().hex[:8]}"
    ws = docker_infra.docker_workspace / name
    ws.mkdir()
    (ws / "t.py").write_text(TRAIN)
    try:
        inner = f"nohup python3 -u /workspace/{name}/t.py > /proc/1/fd/1 2>&1 &"
        r = rehearse(f"docker exec {docker_infra.docker_name} sh -c {quote(inner)}")
        assert r.started, judge.facts(r)
        found = judge.findings(r, expected_log="/proc/1/fd/1")
        assert causes.LOG_ELSEWHERE not in [f.cause for f in found], judge.facts(r)
    finally:
        kill_naming(name)
        shutil.rmtree(ws, ignore_errors=True)


def test_pwd_in_a_log_path_is_the_folder_after_cd(work):
    """S10: `cd sub && … > "$PWD/logs/x.log"` expanded $PWD where the session started: a false log-dir-missing."""
    (work / "sub" / "logs").mkdir(parents=True)
    (work / "sub" / "t.py").write_text(TRAIN)
    r = rehearse('cd sub && nohup python3 -u t.py > "$PWD/logs/x.log" 2>&1 &', cwd=str(work))
    assert r.started and judge.passed(r), judge.facts(r)
    assert f"{work}/sub/logs/x.log.dfdoctor-rh-" in r.plan.line, r.plan.line
    assert sorted(p.name for p in (work / "sub" / "logs").iterdir()) == []


def test_a_name_that_is_not_utf8_is_rehearsed(work):
    """S12: non-UTF-8 bytes in a script's or a log's name: the sentinel died reading the script's name, a false
    killed-on-session-exit."""
    (work / os.fsdecode(b"t\xff.py")).write_text(TRAIN)
    r = rehearse(os.fsdecode(b"nohup python3 -u t\xff.py > l\xff.log 2>&1 &"), cwd=str(work))
    assert r.started and judge.passed(r), judge.facts(r)
    assert not judge.findings(r), judge.facts(r)
    assert sorted(os.fsencode(p.name) for p in work.iterdir()) == [b"t.py", b"t\xff.py"]
