"""The rehearsal of the user's exact line (issue 21), over the real chain: sshd on 127.0.0.1 -> `pct exec` ->
lxc-attach -> container 200, tmux on the host, docker exec -d, and a local launcher script.

Each test names its folder uniquely (others share the containers), and each checks that the rehearsal left
no sentinel, no folder and no renamed log behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest

from conftest import run_dfdoctor
from dfdoctor import causes
from dfdoctor.rehearse import judge
from dfdoctor.rehearse.runner import BUDGET_S, SLACK_MAX_S, rehearse
from infra.fixtures import Infra, docker_infra, growing, infra, kill_naming, procs_naming, ssh_config_env  # noqa: F401

TRAIN = "import time\nfor i in range(400):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


@pytest.fixture
def seed(infra: Infra):
    """A folder in container 200 only (not on the host), holding train.py: the seed's /workspace."""
    name = f"dfd-rh-{uuid.uuid4().hex[:8]}"
    work = f"/tmp/{name}"
    inside = infra.rootfs() / "tmp" / name
    inside.mkdir()
    (inside / "train.py").write_text(TRAIN)
    yield work, inside
    kill_naming(work)
    shutil.rmtree(inside, ignore_errors=True)


def _nothing_left(infra: Infra, work: str, tag_hint: str = "dfdoctor-rh-") -> None:
    """No sentinel runs, no sentinel folder stays in the container or on the host, no renamed log stays."""
    # Ours all started before the command returned: a sentinel that appears later is another test's rehearsal
    # (the doc and README tests rehearse the seed line in parallel workers), and one that ends soon was ending.
    # each process's command line as listed (p.info): read again, one that ended meanwhile raised NoSuchProcess
    ours = [p for p in procs_naming("dfdoctor-rh-") if work in " ".join(p.info["cmdline"] or [])
            or "sentinel.py" in " ".join(p.info["cmdline"] or [])]
    deadline = time.monotonic() + 10
    while _alive(ours) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(ours), "a sentinel outlived its rehearsal"
    inside = infra.rootfs() / work.lstrip("/")
    if inside.exists():
        assert not [f for f in inside.iterdir() if tag_hint in f.name], list(inside.iterdir())


def _alive(procs: list) -> list:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def _no_trace_of(infra: Infra, r) -> None:
    """Nothing of one rehearsal (its tag) stays: no process, no sentinel folder on the host or in the containers,
    no renamed log."""
    tag = r.plan.tag
    assert not [p for p in procs_naming(tag) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for root in (Path("/"), infra.rootfs(), infra.rootfs(infra.vmid_pty1)):
        assert not (root / "tmp" / f"dfdoctor-rh-{tag}").exists(), root
    for log in r.plan.logs:
        for root in (Path("/"), infra.rootfs()):
            renamed = Path(log.renamed if log.renamed.startswith("/") else f"/root/{log.renamed}")
            assert not (root / renamed.relative_to("/")).exists(), renamed


def _launch_path(p: subprocess.CompletedProcess) -> dict:
    doc = json.loads(p.stdout)
    return [c for c in doc["checks"] if c["id"] == "launch.path"][0]


def _check_line(dfdoctor, infra: Infra, line: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    p = dfdoctor("check", "--only", "launch.path", "--shell-command", line, "--format", "json", *extra,
                 env=infra.env(), timeout=120)
    assert p.returncode in (0, 1), p.stderr
    return p, _launch_path(p)


def _causes(rec: dict) -> set:
    return {f["cause"] for f in rec.get("findings") or [rec]} | ({rec["cause"]} if rec.get("cause") else set())


def test_seed_line_fails_on_what_the_host_shell_said_and_its_fix_runs(infra, seed, dfdoctor):
    work, inside = seed
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &'"
    p, rec = _check_line(dfdoctor, infra, line)
    assert p.returncode == 1
    assert rec["status"] == "fail" and rec["basis"] == "observed"
    assert rec["cause"] == causes.LOG_DIR_MISSING
    assert "dfdoctor-host" in rec["summary"] and f"{work}/train.log" in rec["summary"]
    fix = rec["data"]["fix"]
    assert fix["works"], fix
    assert rec["fix"].splitlines()[0] == fix["line"] and "pct exec 200" in fix["line"] and f">>{work}/train.log" in fix["line"]
    _nothing_left(infra, work)
    assert not (inside / "train.log").exists()  # the rehearsal never wrote the user's own log
    # The printed fix, run as printed: a log that grows in the container, a job alive 10 s later.
    ran = subprocess.run(["bash", "-c", fix["line"].replace("ssh root@dfdoctor-host",
                                                            f"ssh -F {infra.ssh_config} root@dfdoctor-host", 1)],
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stderr
    try:
        time.sleep(10)
        assert [q for q in procs_naming(f"{work}/train.py") if q.is_running()], "the job is gone 10 s later"
        assert growing(inside / "train.log", wait=3), "the log stopped growing"  # 3 s: a loaded machine stalls
    finally:
        kill_naming(f"{work}/train.py")


def test_seed_line_with_python_where_only_python3_exists(infra, seed, dfdoctor):
    work, inside = seed
    # the log's folder exists on the host (/tmp), so what stops this line is the interpreter in the container
    log = f"/tmp/{Path(work).name}.log"
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python {work}/train.py > {log} 2>&1 &'"
    p, rec = _check_line(dfdoctor, infra, line)
    assert p.returncode == 1
    assert rec["status"] == "fail" and rec["basis"] == "observed"
    assert rec["cause"] == causes.COMMAND_NOT_FOUND
    assert "`python` does not exist in container 200" in rec["summary"] and "python3 does" in rec["summary"]
    assert "The fix uses python3" in rec["details"], rec
    fix = rec["data"]["fix"]
    assert fix["works"] and "python3 -u" in fix["line"] and " python " not in fix["line"], fix
    assert not Path(log).exists() and not list(Path("/tmp").glob(f"{Path(work).name}.log.dfdoctor-rh-*"))
    _nothing_left(infra, work)


@pytest.fixture(scope="module")
def seed_line_checked(infra: Infra, tmp_path_factory):
    """The seed's line with `python` and a missing folder, checked once for two tests (each rehearsal over ssh and
    pct is ~1 CPU-s): its text on stdout, as docs/targets.md shows it, and its JSON report in a file (the same run:
    --output writes the JSON, stdout keeps the text). (folder, line, process, the JSON report or None)."""
    name = f"dfd-rh-{uuid.uuid4().hex[:8]}"
    work, inside = f"/tmp/{name}", infra.rootfs() / "tmp" / name
    inside.mkdir()
    (inside / "train.py").write_text(TRAIN)
    out = tmp_path_factory.mktemp("seed-line") / "check.json"
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python {work}/train.py > {work}/train.log 2>&1 &'"
    try:
        p = run_dfdoctor("check", "--only", "launch.path", "--shell-command", line, "--format", "json", "--output",
                         str(out), "--format", "text", env=infra.env(), timeout=120)
        yield work, line, p, (json.loads(out.read_text()) if out.exists() else None)
    finally:
        kill_naming(work)
        shutil.rmtree(inside, ignore_errors=True)


def test_seed_line_with_python_and_a_missing_folder(infra, seed_line_checked):
    work, _, p, doc = seed_line_checked
    assert doc is not None, p.stderr
    rec = [c for c in doc["checks"] if c["id"] == "launch.path"][0]
    assert p.returncode == 1 and rec["cause"] == causes.LOG_DIR_MISSING and rec["basis"] == "observed"
    assert "python3 -u" in rec["data"]["fix"]["line"] and rec["data"]["fix"]["works"]


def test_tty_line_dies_with_its_session(infra, seed, dfdoctor):
    work, inside = seed
    # a plain `&` under ssh -tt dies every time (docs/targets.md); `nohup ... &` only loses a race, mostly
    line = (f"ssh -tt root@dfdoctor-host \"pct exec 200 -- sh -c 'python3 -u {work}/train.py "
            f">{work}/train.log 2>&1 &'\"")
    p, rec = _check_line(dfdoctor, infra, line)
    assert p.returncode == 1 and rec["cause"] == causes.KILLED_ON_SESSION_EXIT and rec["basis"] == "observed"
    assert rec["data"]["fix"]["works"] and "-tt" not in rec["data"]["fix"]["line"]
    _nothing_left(infra, work)


def test_a_good_line_passes_and_leaves_nothing(infra, seed):
    work, inside = seed
    line = (f"ssh -F {infra.ssh_config} root@dfdoctor-host \"pct exec 200 -- sh -c 'cd {work} && nohup setsid -f "
            f"python3 -u train.py --lr 3e-4 </dev/null >{work}/train.log 2>&1'\"")
    r = rehearse(line)
    assert r.seconds <= r.budget + 1 <= BUDGET_S + SLACK_MAX_S + 1, (r.seconds, r.slack)
    assert judge.passed(r), judge.facts(r)
    start = r.job_place.start
    assert start["cwd"] == work and start["container"] == "lxc" and start["argv"][1:] == ["--lr", "3e-4"]
    assert start["sid"] == start["pid"] and start["tty"] == ""
    assert not (inside / "train.log").exists()
    _nothing_left(infra, work)
    _no_trace_of(infra, r)


def test_tmux_line_on_the_host(infra, ssh_config_env):
    work = Path(f"/tmp/dfd-rh-tmux-{uuid.uuid4().hex[:8]}")
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    try:
        line = (f"ssh root@dfdoctor-host 'tmux new -d -s rh{work.name[-8:]} "
                f"\"python3 -u {work}/train.py > {work}/train.log 2>&1\"'")
        r = rehearse(line)
        assert judge.passed(r), judge.facts(r)
        assert r.job_place.start["tty"].startswith("/dev/pts")  # a tmux pane
        assert not (work / "train.log").exists() and not list(work.glob("*dfdoctor-rh-*"))
        _no_trace_of(infra, r)
        time.sleep(0.5)
        assert subprocess.run(["tmux", "has-session", "-t", f"rh{work.name[-8:]}"], capture_output=True).returncode != 0
    finally:
        kill_naming(str(work))
        shutil.rmtree(work, ignore_errors=True)


def test_docker_exec_detached_line_with_a_log(docker_infra, dfdoctor, tmp_path):
    name = f"dfd-rh-{uuid.uuid4().hex[:8]}"
    ws = docker_infra.docker_workspace / name
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN)
    try:
        line = f"docker exec -d {docker_infra.docker_name} python3 /workspace/{name}/train.py"
        p, rec = _check_line(dfdoctor, docker_infra, line, "--log", f"/workspace/{name}/train.log")
        assert rec["cause"] == causes.LOG_ELSEWHERE and rec["basis"] == "observed", rec
        assert "not to the log" in rec["summary"]
        assert rec["data"]["fix"]["works"] and f"docker exec {docker_infra.docker_name} sh -c" in rec["fix"]
        assert not list(ws.glob("*dfdoctor-rh-*"))
    finally:
        kill_naming(name)
        shutil.rmtree(ws, ignore_errors=True)


def test_local_launcher_script_missing_log_folder(tmp_path, dfdoctor):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "launch.sh").write_text("#!/bin/bash\ncd \"$(dirname \"$0\")\"\ngit pull\n"
                                        "nohup python3 train.py > logs/train.log 2>&1 &\n")
    p = dfdoctor("check", "--only", "launch.path", "--launcher", "launch.sh", "--format", "json", cwd=tmp_path)
    rec = _launch_path(p)
    assert p.returncode == 1 and rec["cause"] == causes.LOG_DIR_MISSING and rec["basis"] == "observed", rec
    assert any("not rehearsed: git pull" in e for e in rec["evidence"])
    assert not list(tmp_path.rglob("*dfdoctor-rh-*"))


def test_unreachable_host_stays_a_warning_saying_why(dfdoctor, tmp_path):
    line = "ssh root@no-such-host.invalid 'pct exec 200 -- nohup python3 /w/t.py > /w/t.log 2>&1 &'"
    p = dfdoctor("check", "--only", "launch.path", "--shell-command", line, "--format", "json", cwd=tmp_path)
    rec = _launch_path(p)
    assert p.returncode == 0 and rec["status"] == "warn" and rec["basis"] == "static"
    assert "could not rehearse" in rec["details"].lower() and "no-such-host.invalid" in rec["details"]


def test_the_seed_line_after_dashdash_for_check(infra, seed, dfdoctor):
    work, inside = seed
    p = dfdoctor("check", "--only", "launch.path", "--only", "log.writable", "--format", "json", "--",
                 "ssh", "root@dfdoctor-host", f"pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &",
                 env=infra.env(), timeout=120)
    doc = json.loads(p.stdout)
    assert p.returncode == 1, p.stderr
    assert doc["target"] == "pct://root@dfdoctor-host/200" and doc["environment"]["training_python"] == "python3"
    assert doc["verdict"]["cause"] == causes.LOG_DIR_MISSING and "dfdoctor-host" in doc["verdict"]["summary"]
    log = [c for c in doc["checks"] if c["id"] == "log.writable"][0]
    assert log["status"] == "ok", log  # the log the line names, checked in the container, where it exists
    assert "in container 200 on" in log["summary"], log  # each row says where it looked
    _nothing_left(infra, work)


def test_the_seed_line_after_dashdash_for_launch(infra, seed, dfdoctor, tmp_path):
    work, inside = seed
    p = dfdoctor("launch", "--watch", "4", "--format", "json", "--",
                 "ssh", "root@dfdoctor-host", f"pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &",
                 env=infra.env(), timeout=180, cwd=tmp_path)
    try:
        assert "your line: ssh root@dfdoctor-host 'pct exec 200 -- nohup python3 " in p.stderr, p.stderr
        assert "instead, starting python3 " + f"{work}/train.py on pct://root@dfdoctor-host/200" in p.stderr
        doc = json.loads(p.stdout)
        assert p.returncode == 0, (doc["verdict"], p.stderr[-2000:])
        assert growing(inside / "train.log", wait=3), "the log the line names grows in the container"
    finally:
        kill_naming(work)


def test_readme_launch_form_without_cwd(infra, seed, dfdoctor, tmp_path):
    """`dfdoctor launch --target pct://... --log /w/train.log -- python -u /w/train.py`: the job's folder there is
    the script's, never this machine's current folder."""
    work, inside = seed
    p = dfdoctor("launch", "--target", "pct://root@dfdoctor-host/200", "--log", f"{work}/train.log", "--watch", "4",
                 "--format", "json", "--", "python3", "-u", f"{work}/train.py", env=infra.env(), timeout=180,
                 cwd=tmp_path)
    try:
        doc = json.loads(p.stdout)
        assert p.returncode == 0, (doc["verdict"], p.stderr[-2000:])
        assert doc["environment"]["cwd"].startswith(f"{work}, the folder of the script")
        assert growing(inside / "train.log", wait=3)
    finally:
        kill_naming(work)


def test_lxc_attach_line_from_this_machine(infra, seed):
    work, inside = seed
    r = rehearse(f"lxc-attach -n 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &")
    found = judge.findings(r)
    # lxc-attach runs no shell: `>` is this machine's, where the folder does not exist
    assert [o.cause for o in found] == [causes.LOG_DIR_MISSING] and found[0].where == "your machine"
    from dfdoctor.rehearse import fix
    fx = fix.find(r)
    assert fx.works and fx.line.startswith("lxc-attach -n 200 -- sh -c") and "; sleep 1" in fx.line, fx.words()
    _nothing_left(infra, work)
    _no_trace_of(infra, r)
    _no_trace_of(infra, fx.rehearsal)


DOC = Path(__file__).resolve().parent.parent / "docs" / "targets.md"
BEGIN, END = "<!-- seed-output:begin (tests/test_rehearse.py writes this) -->", "<!-- seed-output:end -->"


def test_a_slow_login_is_not_a_session_held_open(infra, seed, tmp_path, monkeypatch):
    """An ssh that takes 4 s to log in (a loaded machine, a far host): the seed line is still judged on what the
    host's shell said, not cut off as a session held open (which read as killed-on-session-exit; CI saw it)."""
    work, _ = seed
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.slow_ssh_config(tmp_path, 4)))
    r = rehearse(f"ssh root@slow-host 'pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &'")
    assert r.slack >= 8 and r.seconds <= r.budget + 1, (r.slack, r.seconds)
    assert [f.cause for f in judge.findings(r)] == [causes.LOG_DIR_MISSING], judge.facts(r)
    _nothing_left(infra, work)


def test_docs_show_the_seed_lines_real_output(infra, seed_line_checked):
    """docs/targets.md shows what `check` prints for the seed's line, from a real run: this test compares, and
    with DFDOCTOR_REGEN_DOCS=1 rewrites, the block (the test's folder shown as /workspace, the host as HOST)."""
    work, line, p, _ = seed_line_checked
    assert p.returncode == 1, p.stderr
    # the printed line keeps the test's own ssh config (`-F`), which a user without DFDOCTOR_SSH_CONFIG has not
    shown = p.stdout.replace(f"-F {infra.ssh_config} ", "").replace(work, "/workspace").replace("dfdoctor-host", "HOST").rstrip()
    shown_line = line.replace(work, "/workspace").replace("dfdoctor-host", "HOST")
    block = f"{BEGIN}\n```\n$ dfdoctor check --only launch.path --shell-command \\\n    \"{shown_line}\"\n{shown}\n```\n{END}"
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    if os.environ.get("DFDOCTOR_REGEN_DOCS") == "1":
        DOC.write_text(text[:start] + block + text[end:])
    else:
        assert text[start:end] == block, "docs/targets.md is out of date: rerun with DFDOCTOR_REGEN_DOCS=1"


def test_one_report_one_fix(infra, seed, dfdoctor):
    """launch.path and persistence.session together: the report's fix lines are one and the same line."""
    work, _ = seed
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python {work}/train.py > {work}/train.log 2>&1 &'"
    p = dfdoctor("check", "--target", infra.pct_target, "--only", "launch.path", "--only", "persistence.session",
                 "--shell-command", line, "--format", "json", "--", "python", f"{work}/train.py",
                 env=infra.env(), timeout=180)
    doc = json.loads(p.stdout)
    fixes = {f for c in doc["checks"] for f in [c.get("fix") or ""] + [x.get("fix") or "" for x in c.get("findings") or []]
             if f and f.startswith(("ssh ", "no working line"))}
    assert len(fixes) == 1 and "python3 -u" in next(iter(fixes)), fixes
    assert doc["verdict"]["fix"] in fixes
    _nothing_left(infra, work)


def test_launcher_script_through_pct(infra, seed, dfdoctor, tmp_path):
    """A launcher in the container, started through ssh + pct exec: followed from --launcher (a local copy of
    it), its `cd "$(dirname "$0")"` kept, its `pip install` not run; the fix starts the launcher itself."""
    work, inside = seed
    text = "#!/bin/sh\ncd \"$(dirname \"$0\")\"\npip install -r requirements.txt\nexec python3 train.py --epochs 3 > train.log 2>&1\n"
    (inside / "launch.sh").write_text(text)
    (tmp_path / "launch.sh").write_text(text)
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup sh {work}/launch.sh > {work}/launch.out 2>&1 &'"
    p, rec = _check_line(dfdoctor, infra, line, "--launcher", str(tmp_path / "launch.sh"))
    assert p.returncode == 1 and rec["cause"] == causes.LOG_DIR_MISSING and rec["basis"] == "observed", rec
    assert any("not rehearsed: pip install" in e for e in rec["evidence"])
    fix = rec["data"]["fix"]
    assert fix["works"], "\n".join([fix["why_not"], *fix["facts"]])
    # over ssh without a terminal, lxc-attach leaves the detached launcher alone: no pause (test_rehearse_pause.py)
    assert f"nohup setsid -f sh {work}/launch.sh </dev/null >>{work}/launch.out 2>&1'" in fix["line"]
    # the fix's rehearsal ran the launcher's exec in the script's folder, as `cd "$(dirname "$0")"` says
    assert any(f"cwd {work}," in f for f in fix["facts"]), fix["facts"]
    assert not list(inside.glob("*dfdoctor-rh-*")) and not (inside / "train.log").exists()
    _nothing_left(infra, work)
