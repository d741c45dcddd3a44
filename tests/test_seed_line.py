"""The seed's line word for word (issue 39): `ssh root@HOST 'pct exec 200 -- nohup python train.py > LOG 2>&1 &'`,
a relative script and `python` where container 200 has only `python3`, over the real sshd + LXC + pct of
tests/infra. `check` must end with lines that, pasted in order through a real shell, start the job and its log
grows; and one missing interpreter is no four failures.

Each test names its folder uniquely (others share the container) and kills the job it started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from dfdoctor import causes
from infra.fixtures import Infra, growing, infra, kill_naming, procs_naming  # noqa: F401

pytestmark = pytest.mark.slow

TRAIN = "import time\nfor i in range(4000):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


@pytest.fixture
def workspace(infra: Infra):
    """A folder in container 200 only (not on the host), holding train.py: the seed's /workspace."""
    name = f"dfd-seed-{uuid.uuid4().hex[:8]}"
    inside = infra.rootfs() / "tmp" / name
    inside.mkdir()
    (inside / "train.py").write_text(TRAIN)
    yield f"/tmp/{name}", inside
    for q in _logging_to(name):  # the pasted job: `python3 -u train.py`, its folder only in its descriptors
        q.kill()
    kill_naming(f"/tmp/{name}")
    shutil.rmtree(inside, ignore_errors=True)


def _logging_to(name: str) -> list:
    """The processes whose stdout is a file in the folder `name` (the job a pasted line started)."""
    out = []
    for q in procs_naming("train.py"):
        try:
            if name in os.readlink(f"/proc/{q.pid}/fd/1"):
                out.append(q)
        except OSError:
            pass
    return out


def _check(dfdoctor, infra: Infra, line: str, *extra: str) -> subprocess.CompletedProcess:
    return dfdoctor("check", *extra, "--", "ssh", "root@dfdoctor-host", line, env=infra.env(), timeout=180)


def _check_quiet(dfdoctor, infra: Infra, line: str, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    """One check printing what `-q` prints (the line to paste) and writing its full report as JSON to `out`, as
    -q's help says (files given with --output are written in full): the process and the report. A check for the
    JSON, then a `check -q` of the same line, rehearsed it all twice (~1 CPU-s over ssh and pct)."""
    p = _check(dfdoctor, infra, line, "-q", *extra, "--format", "json", "--output", str(out), "--format", "text")
    assert out.exists(), (p.returncode, p.stdout, p.stderr)
    return p, json.loads(out.read_text())


def _paste(line: str) -> subprocess.CompletedProcess:
    """The printed line through a real shell, as a user pastes it."""
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _job_runs_and_logs(log: Path, mark: str) -> None:
    deadline = time.monotonic() + 20
    while not (log.exists() and log.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert log.exists(), f"the pasted line made no log {log}"
    assert growing(log, wait=3), "the log does not grow"
    assert _logging_to(mark), "the job is gone"


def _quiet_fix(p: subprocess.CompletedProcess) -> str:
    """The line `-q` prints to paste."""
    assert "; fix: " in p.stdout, p.stdout
    return p.stdout.strip().split("; fix: ", 1)[1].split(" (and ", 1)[0]


def test_the_seed_line_as_typed_gets_one_line_to_paste_that_works(infra, workspace, dfdoctor, tmp_path):
    work, inside = workspace
    line = f"pct exec 200 -- nohup python train.py > {work}/train.log 2>&1 &"
    q, doc = _check_quiet(dfdoctor, infra, line, tmp_path / "check.json")
    assert q.returncode == 1, q.stderr
    assert doc["verdict"]["cause"] == causes.LOG_DIR_MISSING
    # one finding per cause: the missing `python` is a clause of the fix, no failure of its own
    bad = [(c["id"], c["status"], c["summary"]) for c in doc["checks"] if c["status"] in ("fail", "error")]
    assert [b[0] for b in bad] == ["launch.path"], bad
    reach = next(c for c in doc["checks"] if c["id"] == "target.reachable")
    assert reach["status"] == "ok" and "/usr/bin/python3" in reach["summary"], reach
    for c in doc["checks"]:
        if c["id"] in ("imports.smoke", "log.writable"):
            assert c["status"] == "skip" and c["summary"].startswith("not examined: "), c
    rec = next(c for c in doc["checks"] if c["id"] == "launch.path" and c["status"] == "fail")
    fix = rec["data"]["fix"]
    assert fix["works"] and fix["interpreter"] == {"from": "python", "to": "python3"}, fix
    assert f"cd {work}" in fix["line"] and "python3 -u train.py" in fix["line"], fix
    said = " ".join(fix["changes"])
    assert "`python` → `python3`" in said and f"`cd {work}`" in said and "/root" in said, said
    assert doc["verdict"]["fix"].splitlines()[0] == fix["line"]  # the headline's fix first: the line to paste
    # -q prints the line to paste; pasted, the job starts and its log grows in the container
    pasted = _quiet_fix(q)
    assert pasted == fix["line"], (pasted, fix["line"])
    ran = _paste(pasted)
    assert ran.returncode == 0, ran.stderr
    _job_runs_and_logs(inside / "train.log", inside.name)


def test_the_fixs_rehearsals_run_beside_the_lines_own(infra, workspace, dfdoctor):
    """Issue 45: the line's rehearsal, then each candidate fix's, one after the other, took most of the seed line's
    check. The candidates are rehearsed beside the line's own (rehearse/ahead.py): launch.path takes less than the
    line's rehearsal and the working fix's together, and the fix is the one the search finds after it."""
    work, inside = workspace
    line = f"pct exec 200 -- nohup python train.py > {work}/train.log 2>&1 &"
    p = _check(dfdoctor, infra, line, "--only", "launch.path", "--format", "json")
    doc = json.loads(p.stdout)
    rec = next(c for c in doc["checks"] if c["id"] == "launch.path" and c["status"] == "fail")
    fix = rec["data"]["fix"]
    assert fix["works"] and f"cd {work}" in fix["line"] and "python3 -u train.py" in fix["line"], fix
    took = [float(f.split(": ", 1)[1].rstrip(" s")) for f in fix["facts"] if f.startswith("rehearsal time: ")]
    assert len(took) == 1, fix["facts"]
    assert rec["duration_s"] < rec["data"]["rehearsal"]["seconds"] + took[0], (rec["duration_s"], took)
    assert not list(inside.glob("*dfdoctor-rh-*")), "a rehearsal left a file behind"


def test_the_seed_line_with_its_log_folder_missing_in_the_container_too(infra, workspace, dfdoctor, tmp_path):
    work, inside = workspace
    line = f"pct exec 200 -- nohup python train.py > {work}/run7/train.log 2>&1 &"
    q, doc = _check_quiet(dfdoctor, infra, line, tmp_path / "check.json")
    assert q.returncode == 1, q.stderr
    rec = next(c for c in doc["checks"] if c["id"] == "launch.path" and c["status"] == "fail")
    fix = rec["data"]["fix"]
    assert fix["works"], fix
    assert not (inside / "run7").exists(), "dfdoctor created the user's folder"
    # the folder is created on the hop where it is missing, never by a bare `mkdir` on this machine
    assert len(fix["first"]) == 1 and fix["first"][0].startswith("ssh ") and "pct exec 200" in fix["first"][0]
    assert f"mkdir -p {work}/run7" in fix["first"][0], fix
    text = doc["verdict"]["fix"].splitlines()
    assert text[0] == "run first: " + fix["first"][0] and text[1] == fix["line"], text
    # pasted in order (as -q prints them, joined by &&): the folder is made in the container and the job logs
    pasted = _quiet_fix(q)
    assert pasted == f"{fix['first'][0]} && {fix['line']}"
    ran = _paste(pasted)
    assert ran.returncode == 0, ran.stderr
    _job_runs_and_logs(inside / "run7" / "train.log", inside.name)


def test_the_users_hop_options_reach_the_same_place_for_every_check(infra, workspace, dfdoctor, tmp_path):
    """`ssh -F FILE ...` without dfdoctor's own config: target.reachable and the probes go where the line goes
    (they said "Could not resolve hostname"), and the printed line names the file once."""
    work, inside = workspace
    config = tmp_path / "ssh_config"
    shutil.copy(infra.ssh_config, config)
    env = {k: v for k, v in os.environ.items() if k != "DFDOCTOR_SSH_CONFIG"}
    line = f"pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &"
    p = dfdoctor("check", "--format", "json", "--", "ssh", "-F", str(config), "root@dfdoctor-host", line, env=env,
                 timeout=180)
    doc = json.loads(p.stdout)
    reach = next(c for c in doc["checks"] if c["id"] == "target.reachable")
    assert reach["status"] == "ok", reach
    fix = next(c for c in doc["checks"] if c["id"] == "launch.path" and c["status"] == "fail")["data"]["fix"]
    assert fix["works"] and fix["line"].count("-F ") == 1 and f"-F {config}" in fix["line"], fix


def test_the_seed_line_runs_the_projects_venv_when_only_it_has_the_module(infra, workspace, dfdoctor):
    """`python train.py` where container 200's python3 lacks a module train.py imports and the project's venv
    beside it (a real `python3 -m venv`, made in the container) has it: the line to paste runs the venv's python,
    says why, and pasted through a real shell it starts the job and its log grows (the system's python3 would die
    of ModuleNotFoundError)."""
    work, inside = workspace
    mod = f"dfd_only_in_venv_{inside.name[-8:]}"
    made = infra.container(f"cd {work} && python3 -m venv --without-pip .venv && "
                           f"d=$(echo .venv/lib/python3*/site-packages) && echo 'X = 1' > \"$d/{mod}.py\"")
    assert made.returncode == 0, made.stderr
    (inside / "train.py").write_text(f"import {mod}\n" + TRAIN)
    line = f"pct exec 200 -- nohup python train.py > {work}/train.log 2>&1 &"
    p = _check(dfdoctor, infra, line, "--only", "launch.path", "--format", "json")
    doc = json.loads(p.stdout)
    fix = next(c for c in doc["checks"] if c["id"] == "launch.path" and c["status"] == "fail")["data"]["fix"]
    venv = f"{work}/.venv/bin/python"
    assert fix["works"] and fix["interpreter"] == {"from": "python", "to": venv}, fix
    assert f"{venv} -u train.py" in fix["line"] and f"cd {work}" in fix["line"], fix
    said = " ".join(fix["changes"])
    assert f"`python` → `{venv}`: the project's venv" in said and mod in said, said
    ran = _paste(fix["line"])
    assert ran.returncode == 0, ran.stderr
    _job_runs_and_logs(inside / "train.log", inside.name)


def test_hop_options_never_carry_one_that_runs_a_command_here():
    from dfdoctor.targets.kinds.ssh import hop_options

    prefix = ["ssh", "-F", "cfg", "-i", "key", "-J", "jump", "-oProxyCommand=nc %h %p", "-o", "LocalCommand=x",
              "-o", "Port=2", "-t", "host"]
    assert hop_options(prefix) == ("-F", "cfg", "-i", "key", "-J", "jump", "-o", "Port=2")


def test_a_launcher_that_cds_first_gets_the_folder_its_log_is_really_in(infra, workspace, dfdoctor, tmp_path):
    """`cd code` then `> outputs/run7/train.log`: the folder to create is code/outputs/run7 in the container, on
    the hop (it was a bare `mkdir -p outputs/run7`), and the launcher's own failure is read from its output (the
    "tried" line blamed the session's end)."""
    work, inside = workspace
    (inside / "code").mkdir()
    shutil.move(str(inside / "train.py"), str(inside / "code" / "train.py"))
    text = "#!/bin/sh\ncd code\nnohup python3 train.py > outputs/run7/train.log 2>&1 &\n"
    (inside / "launch.sh").write_text(text)
    (tmp_path / "launch.sh").write_text(text)
    line = f'pct exec 200 -- sh -c "cd {work} && sh launch.sh"'
    q, doc = _check_quiet(dfdoctor, infra, line, tmp_path / "check.json", "--launcher", str(tmp_path / "launch.sh"))
    rec = next(c for c in doc["checks"] if c["id"] == "launch.path" and c["status"] == "fail")
    assert rec["cause"] == causes.LOG_DIR_MISSING and f"{work}/code/outputs/run7" in rec["summary"], rec
    fix = rec["data"]["fix"]
    assert fix["works"], fix
    assert fix["first"] and fix["first"][0].startswith("ssh ") and f"mkdir -p {work}/code/outputs/run7" in \
        fix["first"][0], fix
    assert "outputs/run7" not in fix["line"], fix  # the launcher's output goes next to it, not into the job's log
    assert not (inside / "code" / "outputs").exists(), "dfdoctor created the user's folder"
    pasted = _quiet_fix(q)
    ran = _paste(pasted)
    assert ran.returncode == 0, ran.stderr
    _job_runs_and_logs(inside / "code" / "outputs" / "run7" / "train.log", inside.name)


def test_launch_of_the_seed_line_keeps_it_and_ends_with_a_line_that_works(infra, workspace, dfdoctor, tmp_path):
    """`launch` of the exact line: the line as typed in the report (JSON `command_as_typed`, HTML's Command), what
    reads wrong in it in the default text, and, refused, the line seen to work first among the fixes."""
    work, inside = workspace
    line = f"pct exec 200 -- nohup python train.py > {work}/train.log 2>&1 &"
    typed = f"ssh root@dfdoctor-host '{line}'"
    p = dfdoctor("launch", "--format", "json", "--output", str(tmp_path / "r.json"), "--format", "html", "--output",
                 str(tmp_path / "r.html"), "--format", "text", "--", "ssh", "root@dfdoctor-host", line,
                 env=infra.env(), timeout=240, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"your line: {typed}" in p.stderr and "is parsed by the shell on dfdoctor-host" in p.stderr, p.stderr
    # the folder is only in the container: the host's shell cannot open the log, and nothing lands anywhere
    assert f"parsed by the shell on dfdoctor-host, where {work} does not exist: that shell cannot open the log" \
        in p.stderr and "lands on" not in p.stderr and "is written on" not in p.stderr, p.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["command_as_typed"] == typed and doc["command"] == ["python", "train.py"], doc["command"]
    html = (tmp_path / "r.html").read_text()
    assert html.index("nohup python train.py &gt;") < html.index("<dt>Ran</dt>"), "the line as typed comes first"
    pasted = doc["verdict"]["fix"].splitlines()[0]
    assert pasted.startswith("ssh ") and "python3 -u train.py" in pasted, doc["verdict"]["fix"]
    ran = _paste(pasted)
    assert ran.returncode == 0, ran.stderr
    _job_runs_and_logs(inside / "train.log", inside.name)


def test_launch_says_what_the_hosts_shell_does_with_the_log_as_its_folder_is_there_or_not(infra, workspace,
                                                                                        monkeypatch):
    """`launch`'s "what is wrong" said the log "lands on" the host also where the log's folder is only in the
    container: the host's shell then cannot open it, and nothing starts. The folder is looked at on the host
    (`test -d` over the user's own hop), and each case said as it is."""
    from types import SimpleNamespace

    from dfdoctor.launchline.typed import launch_note
    from dfdoctor.targets import parse_target

    work, inside = workspace
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", infra.env()["DFDOCTOR_SSH_CONFIG"])
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python3 train.py > {work}/train.log 2>&1 &'"
    ctx = SimpleNamespace(typed_line=line, cwd=work, cwd_note=None, target=parse_target(infra.pct_target),
                          command=["python3", "train.py"], log=None)
    assert infra.ssh(f"test -d {work}").returncode == 1  # the workspace is the container's only
    said = launch_note(ctx)
    assert f"parsed by the shell on dfdoctor-host, where {work} does not exist: that shell cannot open the log " \
        "(No such file or directory), so nothing starts in container 200" in said, said
    assert infra.ssh(f"mkdir {work}").returncode == 0  # now the host has that folder too
    try:
        said = launch_note(ctx)
        assert f"parsed by the shell on dfdoctor-host, where {work} exists: its log is written on dfdoctor-host, " \
            "not in container 200" in said, said
    finally:
        infra.ssh(f"rmdir {work}")


def test_a_background_and_list_whose_shell_holds_ssh_open_is_said(infra, dfdoctor, tmp_path):
    """`ssh HOST 'cd DIR && nohup python3 t.py > LOG 2>&1 &'`: the whole `&&` list goes to the background, its
    shell keeps ssh's output, and ssh does not return until the job ends (hours); the rehearsal saw the session
    held and the job survive it, and `check` said OK with no word of it. With `;` the line returns: nothing said."""
    (tmp_path / "t.py").write_text(TRAIN)
    try:
        for sep, said in (("&&", True), (";", False)):
            line = f"cd {tmp_path} {sep} nohup python3 -u t.py > {tmp_path}/t.log 2>&1 &"
            doc = json.loads(_check(dfdoctor, infra, line, "--only", "launch.path", "--format", "json").stdout)
            (rec,) = doc["checks"]
            held = [f for f in rec.get("findings") or [rec] if "does not return until the job ends" in f["summary"]]
            assert bool(held) is said, (sep, [f["summary"] for f in rec.get("findings") or [rec]])
            if said:
                assert held[0]["status"] == "warn" and "`( … ) > LOG 2>&1 < /dev/null &`" in held[0]["fix"], held
    finally:
        kill_naming(str(tmp_path))
