"""Do no harm in the advice (issue 40, round 5): a fix line dfdoctor prints, run as printed, never costs the user
a file: it keeps the user's append, and a line dfdoctor cannot rehearse is never passed as OK. Each test runs the
real CLI (or the printed line, in bash) on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.shell import quote
from infra.fixtures import infra  # noqa: F401
from support.in_process import run_here

DFDOCTOR = str(Path(sys.executable).parent / "dfdoctor")


def _launch_path(work: Path, line: str, here: bool = False) -> dict:
    """`dfdoctor check --only launch.path --shell-command LINE` in `work`: launch.path's record and the exit code.
    `here`: through the same entry in this process (support/in_process), for a test's further lines."""
    out = work / "report.json"
    args = ["check", "--cwd", str(work), "--only", "launch.path", "--shell-command", line, "--format", "json",
            "--output", str(out)]
    if here:
        p = run_here(*args, cwd=work, full_env=dict(os.environ))
    else:
        p = subprocess.run([DFDOCTOR, *args], cwd=work, capture_output=True, text=True, timeout=120)
    doc = json.loads(out.read_text())
    rec = next(c for c in doc["checks"] if c["id"] == "launch.path")
    return {**rec, "rc": p.returncode}


# -- S21: a "not tried" line keeps the user's `>>` ----------------------------------------------------------------
def test_a_not_tried_fix_line_keeps_the_users_append_and_the_log_survives_it(tmp_path):
    """The line goes through a host dfdoctor cannot reach, so no rehearsal runs and the reading's line is printed
    as not tried. Run as printed (through ssh/pct stand-ins that keep each hop's parsing), it must append to the
    user's log, never empty it."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "train.py").write_text("print('step 2')\n")
    log = work / "train.log"
    log.write_text("step 1 of yesterday's run\n")
    remote = f"pct exec 200 -- nohup {sys.executable} {quote(str(work / 'train.py'))} >> {quote(str(log))} 2>&1 &"
    rec = _launch_path(work, "ssh root@HOST " + quote(remote))
    untried = rec["data"]["untried"]
    assert untried and rec["data"]["corrected"] is None, rec
    assert f">>{quote(str(log))}" in untried, untried
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')  # the remote login shell parses the words
    (bindir / "pct").write_text('#!/bin/sh\nshift 3\nexec "$@"\n')  # pct exec: exec's its words, no shell
    for f in bindir.iterdir():
        f.chmod(0o755)
    subprocess.run(["bash", "-c", untried], env=dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}"),
                   timeout=30, check=True)
    deadline = time.monotonic() + 30
    while "step 2" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert log.read_text() == "step 1 of yesterday's run\nstep 2\n"


# -- R3: a program outside the wrapper table is never passed; a missing log folder under it is still observed -----
WRAPPED = ["mpirun -np 1 python3 t.py > logs/x.log", "xvfb-run -a python3 t.py > logs/x.log 2>&1",
           "strace -f -o F python3 t.py > logs/x.log"]


def test_an_unknown_wrapper_with_a_missing_log_folder_fails_on_what_the_shell_did(tmp_path):
    """The shell opens `> logs/x.log` before any command of the line runs: a missing folder is observed whatever
    the wrapper would have done. The wrapper itself is never run (strace's -o F is not written)."""
    (tmp_path / "t.py").write_text("print('step 1')\n")
    for line in WRAPPED:  # the first line through the console script, the others here
        rec = _launch_path(tmp_path, line, here=line != WRAPPED[0])
        assert rec["rc"] == 1 and rec["status"] == "fail" and rec["cause"] == "log-dir-missing", (line, rec)
        fails = [f for f in rec["findings"] if f["status"] == "fail"]
        assert "mkdir -p logs" in fails[0]["fix"] and "not tried" in fails[0]["fix"], fails
        assert any(f["summary"].startswith("not rehearsed:") and line.split()[0] in f["summary"]
                   for f in [rec, *rec["findings"]]), rec["findings"]
    assert not (tmp_path / "F").exists() and not (tmp_path / "logs").exists()


def test_an_unknown_wrapper_whose_log_folder_exists_is_not_rehearsed_never_ok(tmp_path):
    """Detached and logging, the job rehearsed without its wrapper would pass: the line still is not."""
    (tmp_path / "t.py").write_text("print('step 1')\n")
    (tmp_path / "logs").mkdir()
    for wrapped in WRAPPED:
        run, log = wrapped.split(" > ")[0], str(tmp_path / "logs" / "x.log")
        line = f"nohup setsid -f {run.replace('python3', 'python3 -u')} </dev/null > {log} 2>&1"
        rec = _launch_path(tmp_path, line, here=wrapped != WRAPPED[0])  # the first through the console script
        said = [rec, *rec["findings"]]  # a check's one result is the record itself (findings: [])
        assert rec["status"] == "warn" and rec["rc"] == 0, (line, rec)
        assert not any(f["status"] == "ok" for f in said), (line, said)
        assert any(f["summary"].startswith("not rehearsed") for f in said), said
    assert not (tmp_path / "F").exists() and list((tmp_path / "logs").iterdir()) == []


# -- S10: a fix never names `$VAR` text as a path -----------------------------------------------------------------
def test_a_fix_for_a_pwd_log_after_cd_names_the_expanded_folder_and_works_as_printed(tmp_path):
    """`cd sub && … > "$PWD/logs/x.log"`: the folder to create and the log of the fix are the paths the shell
    opened (sub/logs), never `'T/sub/"$PWD/logs'`; run as printed, they start the job and fill that log."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.py").write_text("print('step 1', flush=True)\n")
    rec = _launch_path(tmp_path, 'cd sub && python3 t.py > "$PWD/logs/x.log" 2>&1 &')
    assert rec["cause"] == "log-dir-missing" and rec["status"] == "fail", rec
    fx = rec["data"]["fix"]
    assert fx["works"] and "$" not in fx["line"] + " ".join(fx["first"]), fx
    assert fx["first"] == [f"mkdir -p {quote(str(tmp_path / 'sub' / 'logs'))}"], fx
    assert not (tmp_path / "sub" / "logs").exists()  # dfdoctor never creates the user's folders
    for line in [*fx["first"], fx["line"]]:
        subprocess.run(["bash", "-c", line], cwd=tmp_path, timeout=30, check=True)
    log = tmp_path / "sub" / "logs" / "x.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and "step 1" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert log.read_text() == "step 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "sub"]


@pytest.mark.parametrize("typed, lands", [('"$PWD/logs/x.log"', "w/sub/logs/x.log"), ("~/x.log", "home/x.log")])
def test_a_not_tried_line_logs_where_the_users_variable_or_tilde_path_named(tmp_path, typed, lands):
    """No rehearsal can run (an unreachable host): the reading's line, run as printed through an ssh stand-in
    whose login shell parses the words, writes the file the user's `$PWD/…` or `~/…` named, not a file literally
    called `$PWD` or `~`."""
    sub = tmp_path / "w" / "sub"
    (sub / "logs").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (sub / "t.py").write_text("print('step 1', flush=True)\n")
    remote = f"cd {quote(str(sub))} && {sys.executable} t.py > {typed} 2>&1 &"
    rec = _launch_path(tmp_path / "w", "ssh root@HOST " + quote(remote))
    untried = rec["data"]["untried"]
    assert untried and rec["data"]["corrected"] is None, rec
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')
    (bindir / "ssh").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", HOME=str(tmp_path / "home"))
    subprocess.run(["bash", "-c", untried], env=env, cwd=tmp_path, timeout=30, check=True)
    log = tmp_path / lands
    deadline = time.monotonic() + 30
    while not (log.exists() and "step 1" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert log.read_text() == "step 1\n", untried
    assert not any("$" in p.name or p.name == "~" for p in tmp_path.rglob("*")), untried


# -- S12: a fix names the very file whose name is not UTF-8 -------------------------------------------------------
def test_a_fix_for_names_that_are_not_utf8_names_the_same_files_as_printed(tmp_path):
    """The report shows a byte that is not UTF-8 as `\\xNN`: the fix, run as printed (from the JSON report), must
    start that script and fill that log, not files whose names hold a backslash."""
    (tmp_path / os.fsdecode(b"t\xff.py")).write_text("print('step 1', flush=True)\n")
    rec = _launch_path(tmp_path, os.fsdecode(b"nohup python3 -u t\xff.py > logs/l\xff.log 2>&1 &"))
    assert rec["cause"] == "log-dir-missing" and rec["status"] == "fail", rec
    fx = rec["data"]["fix"]
    assert fx["works"] and fx["first"] == ["mkdir -p logs"], fx
    for line in [*fx["first"], fx["line"]]:
        subprocess.run(["bash", "-c", line], cwd=tmp_path, timeout=30, check=True)
    log = tmp_path / "logs" / os.fsdecode(b"l\xff.log")
    deadline = time.monotonic() + 30
    while not (log.exists() and "step 1" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert log.read_text() == "step 1\n", fx
    assert sorted(os.fsencode(p.name) for p in (tmp_path / "logs").iterdir()) == [b"l\xff.log"]


# -- a --launcher file is read bounded ------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_huge_launcher_file_is_not_read_whole(tmp_path):
    """`--launcher` naming a 384 MiB file by mistake: at most a launch script's worth of it is read (it was read
    whole, then decoded: ~1 GiB resident on a shared machine)."""
    big = tmp_path / "launch.sh"
    with open(big, "wb") as f:
        f.truncate(384 << 20)  # sparse: no disk used
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True, "
             "timeout=300); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(p.stdout)")
    p = subprocess.run([sys.executable, "-c", probe, DFDOCTOR, "check", "--cwd", str(tmp_path), "--only",
                        "launch.path", "--launcher", str(big)], capture_output=True, text=True, timeout=400)
    peak_kib, said = p.stdout.split("\n", 1)
    assert int(peak_kib) < 250 * 1024, (peak_kib, said)
    assert "cannot read the launcher" in said and "larger than" in said, said


# -- ssh's own log (`-E FILE`) is never appended to by a rehearsal --------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("opt", ["-v -E {log}", "-vE{log}", "-fvE {log}"])
def test_a_rehearsal_never_appends_to_the_ssh_clients_own_log(infra, tmp_path, opt):
    """`ssh -v -E FILE`: ssh appends its debug lines to FILE, a file of the user's; the rehearsal's ssh (and every
    session of dfdoctor's own to that host) writes them to /dev/null."""
    work = tmp_path / "w"
    (work / "logs").mkdir(parents=True)
    (work / "t.py").write_text("print('step 1', flush=True)\n")
    ssh_log = tmp_path / "ssh.log"
    ssh_log.write_text("the user's ssh log\n")
    line = (f"ssh {opt.format(log=quote(str(ssh_log)))} root@dfdoctor-host "
            f"{quote(f'cd {work} && nohup setsid -f python3 -u t.py </dev/null > {work}/logs/x.log 2>&1')}")
    out = tmp_path / "report.json"
    p = subprocess.run([DFDOCTOR, "check", "--only", "launch.path", "--shell-command", line, "--format", "json",
                        "--output", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                       env={**os.environ, "DFDOCTOR_SSH_CONFIG": str(infra.ssh_config)})
    rec = next(c for c in json.loads(out.read_text())["checks"] if c["id"] == "launch.path")
    assert rec["data"]["rehearsal"]["line"], rec  # it was rehearsed
    assert ssh_log.read_text() == "the user's ssh log\n"
    assert "-E" in json.dumps(rec["data"]["rehearsal"]["not_rehearsed"]), (p.stdout, rec)
    assert list((work / "logs").iterdir()) == []
