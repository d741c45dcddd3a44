"""Do no harm, round 4 (issue 40, the findings outside the rehearsal): each test reproduces one finding of the
fourth hostile review on the real thing (real jobs, real signals, real files) and holds its fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dfdoctor.run import record
from infra.fixtures import infra, ssh_config_env  # noqa: F401
from jobs.harness import dfdoctor, job, job_env, kill_runs, launch, text_of, wait_for
from support.in_process import run_here
from test_stop import _job_processes  # the one reader of a run's processes, as test_stop_remote uses it


# -- S17: a copy of the project folder never stops the original's job ------------------------------------------
@pytest.mark.slow
def test_stop_in_a_cp_a_copy_of_the_project_does_not_stop_the_originals_job(tmp_path):
    exp_a, exp_b = tmp_path / "expA", tmp_path / "expB"
    exp_a.mkdir()
    try:
        _, rep = launch(exp_a, *job("sleeps.py"), watch=3, extra=("--settle", "0"))
        run_dir = Path(rep["run"]["dir"])
        assert record.load(run_dir).job_alive(), text_of(rep)
        procs = _job_processes(run_dir)
        assert procs
        subprocess.run(["cp", "-a", str(exp_a), str(exp_b)], check=True)
        p = dfdoctor("stop", "--cwd", str(exp_b), "--grace", "1", cwd=exp_b, timeout=90)
        assert "stopped pid" not in p.stdout, p.stdout
        assert all(q.is_running() and q.status() != psutil.STATUS_ZOMBIE for q in procs), \
            "a stop in the copy ended the original's job"
        # the copy says it is one: not the job's folder, never "running" (a job it cannot see) nor "killed"
        copied = record.load(next((exp_b / ".dfdoctor" / "runs").iterdir()))
        assert not copied.job_alive(), "the copy's record claims the original's job"
        v = json.loads(dfdoctor("status", "--cwd", str(exp_b), "--format", "json", cwd=exp_b, timeout=90).stdout)
        assert v["verdict"]["state"] == "unknown" and "is a copy" in v["verdict"]["summary"], v["verdict"]
        assert str(exp_a) in v["verdict"]["fix"], v["verdict"]
        p = dfdoctor("stop", "--cwd", str(exp_a), "--grace", "1", cwd=exp_a, timeout=90)  # the original does
        assert p.returncode == 0 and "stopped pid" in p.stdout, p.stdout
    finally:
        kill_runs(exp_a)


# -- S18: --output never replaces the targets file, nor a file the line's own redirections name -----------------
def _check(work: Path, *args: str, here: bool = False) -> subprocess.CompletedProcess:
    """`here`: through the same entry in this process (support/in_process)."""
    full = ("check", "--cwd", str(work), "--only", "log.writable", *args)
    return run_here(*full, cwd=work, full_env=job_env()) if here else dfdoctor(*full, cwd=work, timeout=120)


def test_an_output_naming_the_targets_file_is_refused_and_the_file_survives(tmp_path):
    (tmp_path / "t.py").write_text("print('hi')\n")
    targets = tmp_path / "targets.txt"
    targets.write_text("local\n")
    p = _check(tmp_path, "--targets-file", str(targets), "--format", "json", "--output", str(targets),
               "--", "python3", "t.py")
    assert p.returncode == 2 and "--targets-file" in p.stderr, p.stdout + p.stderr
    assert targets.read_text() == "local\n"


@pytest.mark.parametrize("line", [["python3 t.py >>train.log 2>&1"],
                                  ["bash", "-c", "python3 t.py > out.log 2>> train.log"]])
def test_an_output_naming_the_lines_own_append_log_is_refused_and_the_log_survives(tmp_path, line):
    (tmp_path / "t.py").write_text("print('hi')\n")
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n")
    p = _check(tmp_path, "--format", "json", "--output", str(log), "--", *line, here=True)  # the same entry, here
    assert p.returncode == 2 and "it would be overwritten" in p.stderr, p.stdout + p.stderr
    assert log.read_text() == "step 1 loss 2.3\n"


# -- S20: a launch never prunes the run folder another dfdoctor process still works on ----------------------------
HOLDER = """
import json, sys, time
from pathlib import Path
from dfdoctor.run.folder import new_run
run_id, path = new_run(Path(sys.argv[1]))  # as `dfdoctor launch` makes its run folder
(path / "spec.json").write_text(json.dumps({"run_id": run_id, "argv": ["true"]}))
print(path, flush=True)
time.sleep(600)  # its job ended; it is still writing its report
"""


@pytest.mark.slow
def test_a_launch_with_keep_runs_1_never_prunes_the_run_folder_another_launch_still_reports_on(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        first = Path(holder.stdout.readline().strip())
        assert first.is_dir()
        _, rep = launch(tmp_path, *job("exited_early.py"), watch=2, extra=("--keep-runs", "1"))
        assert Path(rep["run"]["dir"]).is_dir()
        assert first.is_dir(), "the second launch pruned the run folder the first one still works on"
    finally:
        holder.kill()
        holder.wait()
    _, rep = launch(tmp_path, *job("exited_early.py"), watch=2, extra=("--keep-runs", "1"))
    assert not first.exists(), "once its process ended, the old run folder is pruned as before"


# -- S19: the shared ssh connection never outlives dfdoctor, even after a SIGKILL ---------------------------------
CONNECTS = """
import os, sys, time
from dfdoctor.targets import parse_target, transport
t = parse_target(sys.argv[1])
with transport.connected(t) as err:
    print(err or transport.control_path(t), flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_a_sigkill_inside_a_shared_ssh_connection_leaves_no_ssh_master_behind(ssh_config_env):
    infra = ssh_config_env
    holder = subprocess.Popen([sys.executable, "-c", CONNECTS, infra.ssh_target], stdout=subprocess.PIPE, text=True,
                              env=infra.env())
    sock = holder.stdout.readline().strip()
    assert os.path.exists(sock), sock  # logged in: the master serves its socket

    def masters() -> list[psutil.Process]:
        out = []
        for p in psutil.process_iter(["cmdline"]):
            if sock in " ".join(p.info["cmdline"] or []) and p.pid != holder.pid:
                out.append(p)
        return out

    found = masters()
    assert found, "no ssh master found for the socket"
    holder.kill()  # SIGKILL: no finally of dfdoctor's runs
    holder.wait()
    try:
        assert wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in found), 15), \
            f"the ssh master outlived dfdoctor: {[p.pid for p in found]}"
        assert wait_for(lambda: not os.path.exists(os.path.dirname(sock)), 5), "the socket's folder was left"
    finally:
        for p in found:
            try:
                p.kill()
            except psutil.Error:
                pass


CONNECTS_ONCE = """
import sys
from dfdoctor.targets import parse_target, transport
t = parse_target(sys.argv[1])
with transport.connected(t) as err:
    print(err or "connected", flush=True)
print("closed", flush=True)
sys.stdin.read()  # dfdoctor runs on after the block, until the test is done looking at its children
"""


def test_the_watchman_of_a_shared_ssh_connection_is_reaped_when_the_block_ends(ssh_config_env):
    """Round 16: the watchman that ends the master should dfdoctor be killed exits as the block ends, and was
    left a zombie child of dfdoctor's for as long as dfdoctor ran on. No child of the process is left once it
    has closed its shared connection (the master, daemonized by `ssh -f`, is no child of its)."""
    infra = ssh_config_env
    holder = subprocess.Popen([sys.executable, "-c", CONNECTS_ONCE, infra.ssh_target], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=infra.env())
    try:
        assert holder.stdout.readline().strip() == "connected"
        assert holder.stdout.readline().strip() == "closed"
        me = psutil.Process(holder.pid)

        def children() -> list[tuple[int, str]]:
            out = []
            for c in me.children():
                try:
                    out.append((c.pid, c.status()))
                except psutil.NoSuchProcess:
                    pass
            return out

        assert wait_for(lambda: not children(), 20), f"children left after the block (pid, state): {children()}"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


# -- S13: a token as a URL's user part is never printed ------------------------------------------------------------
@pytest.mark.parametrize("url", ["git+https://Zq8s3cr3tT0kenValue9876@git.example.com/org/private.git",
                                 "https://Zq8s3cr3tT0kenValue9876:@pypi.example.com/simple/private-pkg/"])
def test_a_token_as_a_urls_user_part_in_requirements_is_masked_everywhere(tmp_path, url):
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "requirements.txt").write_text(f"{url}\nnot a requirement at all ((\n")
    out = tmp_path / "r.json"
    p = dfdoctor("check", "--cwd", str(tmp_path), "--only", "deps.requirements", "-v", "--format", "text",
                 "--format", "json", "--output", "-", "--output", str(out), "--", "python3", "t.py", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    said = p.stdout + p.stderr + out.read_text()
    assert "requirements.txt" in said
    assert "Zq8s3cr3tT0kenValue9876" not in said, said


# -- S14: a private key named by `-r` is never quoted -----------------------------------------------------------
KEY_LINE = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"


def test_a_private_key_included_by_dash_r_is_not_read_and_never_printed(tmp_path):
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "deploy_key").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n" + (KEY_LINE + "\n") * 5 +
                                                  "-----END OPENSSH PRIVATE KEY-----\n")
    (tmp_path / "requirements.txt").write_text("-r keys/deploy_key\n")
    out = tmp_path / "r.json"
    p = dfdoctor("check", "--cwd", str(tmp_path), "--only", "deps.requirements", "-v", "--format", "text",
                 "--format", "json", "--output", "-", "--output", str(out), "--", "python3", "t.py", cwd=tmp_path)
    said = p.stdout + p.stderr + out.read_text()
    assert p.returncode in (0, 1) and "keys/deploy_key" in said, said
    assert KEY_LINE[:20] not in said and "cannot parse requirement" not in said, said
    assert "PEM block" in said, said


# -- S15: a huge file named by `-r` is never read whole -------------------------------------------------------------
MAXRSS = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)
print(p.stdout + p.stderr)
"""


@pytest.mark.slow
def test_a_512_mib_file_included_by_dash_r_is_not_read_whole(tmp_path):
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data" / "corpus.txt", "wb") as f:  # sparse: 512 MiB of "a"-free text costs no disk
        f.truncate(512 << 20)
    (tmp_path / "requirements.txt").write_text("-r data/corpus.txt\n")
    (tmp_path / "README.md").write_text("```\npip install -r data/corpus.txt\n```\n")
    from jobs.harness import DFDOCTOR
    p = subprocess.run([sys.executable, "-c", MAXRSS, DFDOCTOR, "check", "--cwd", str(tmp_path), "--only",
                        "deps.requirements", "-v", "--", "python3", "t.py"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    first, _, said = p.stdout.partition("\n")
    maxrss_kib, rc = (int(x) for x in first.split())
    assert rc in (0, 1), said
    assert "data/corpus.txt" in said and "not read" in said, said
    assert maxrss_kib < 300 * 1024, f"dfdoctor grew to {maxrss_kib >> 10} MiB reading the file"


# -- S16: a README code line of 200,000 blanks is read at once ------------------------------------------------------
@pytest.mark.slow
def test_a_readme_code_line_of_200000_blanks_does_not_hang_the_check(tmp_path):
    (tmp_path / "t.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    (tmp_path / "README.md").write_text("```\npython t.py" + " " * 200_000 + "--epochs 3\n```\n")
    p = dfdoctor("check", "--cwd", str(tmp_path), "--only", "deps.requirements", "--timeout", "30", "--",
                 "python3", "t.py", cwd=tmp_path, timeout=90)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "could not look" not in p.stdout and "timed out" not in p.stdout, p.stdout


# -- S8, S9: imports.smoke compiles what Python compiles, as Python compiles it ------------------------------------
def _smoke(work: Path, here: bool = False) -> subprocess.CompletedProcess:
    """`here`: through the same entry in this process (support/in_process)."""
    args = ("check", "--cwd", str(work), "--only", "imports.smoke", "--", "python3", "main.py")
    return run_here(*args, cwd=work, full_env=job_env()) if here else dfdoctor(*args, cwd=work, timeout=120)


def test_a_valid_1500_term_concatenation_is_no_syntax_error(tmp_path):
    (tmp_path / "concat.py").write_text("X = " + " + ".join(['"a"'] * 1500) + "\n")
    (tmp_path / "main.py").write_text("import concat\nprint(len(concat.X))\n")
    assert subprocess.run(["python3", "main.py"], cwd=tmp_path, capture_output=True, text=True).stdout == "1500\n"
    p = _smoke(tmp_path)
    assert p.returncode == 0 and "syntax" not in p.stdout.lower(), p.stdout + p.stderr


def test_a_module_imported_only_for_a_newer_python_is_not_compiled_here(tmp_path):
    (tmp_path / "main.py").write_text("import sys\nif sys.version_info >= (3, 99):\n    import future_only\n"
                                      "else:\n    import today\nprint(today.Alias)\n")
    (tmp_path / "future_only.py").write_text("type Alias = int\nmatch = => 3\n")  # no Python today compiles it
    (tmp_path / "today.py").write_text("Alias = int\n")
    assert subprocess.run(["python3", "main.py"], cwd=tmp_path, capture_output=True).returncode == 0
    p = _smoke(tmp_path, here=True)
    assert p.returncode == 0 and "future_only" not in p.stdout, p.stdout + p.stderr


# -- S7: the installed-packages answer is not reused after a .pth file is rewritten in place ----------------------
def _dist(where: Path, version: str) -> None:
    info = where / f"foo_pkg-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: foo-pkg\nVersion: {version}\n")
    (where / "foo_pkg").mkdir()
    (where / "foo_pkg" / "__init__.py").write_text("")


@pytest.mark.slow
def test_the_installed_answer_is_read_again_after_a_pth_file_is_rewritten_in_place(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    _dist(tmp_path / "one", "1.0")
    _dist(tmp_path / "two", "2.0")
    pth = site / "extra.pth"
    pth.write_text(str(tmp_path / "one") + "\n")
    (tmp_path / "t.py").write_text("import foo_pkg\n")
    (tmp_path / "requirements.txt").write_text("foo-pkg==1.0\n")

    def check() -> subprocess.CompletedProcess:
        return dfdoctor("check", "--cwd", str(tmp_path), "--only", "deps.requirements", "--python",
                        str(venv / "bin" / "python"), "--", str(venv / "bin" / "python"), "t.py", cwd=tmp_path,
                        timeout=120)

    p = check()
    assert p.returncode == 0, p.stdout + p.stderr
    site_mtime = site.stat().st_mtime_ns
    with open(pth, "r+") as f:  # in place: the folder's mtime does not change
        f.write(str(tmp_path / "two") + "\n")
    assert site.stat().st_mtime_ns == site_mtime
    p = check()
    assert p.returncode == 1 and "2.0" in p.stdout, p.stdout + p.stderr


# -- R17: deleting a file that is not there is no missing input -------------------------------------------------
@pytest.mark.parametrize("call", ['os.remove("stale.lock")', 'pathlib.Path("stale.lock").unlink()'])
def test_deleting_a_missing_file_is_not_read_as_a_missing_input(tmp_path, call):
    (tmp_path / "t.py").write_text(f"import os, pathlib\nprint('start', flush=True)\n{call}\n")
    _, rep = launch(tmp_path, "python3", "t.py", watch=10)
    v = rep["verdict"]
    assert v["cause"] != "input-missing" and "deletes stale.lock" in v["summary"], text_of(rep)
    assert "Create" not in v["fix"] and "missing_ok=True" in v["fix"], text_of(rep)


# -- N17: $GITHUB_STEP_SUMMARY is never one of the user's files ----------------------------------------------------
@pytest.mark.parametrize("aimed_at", ["t.py", "train.log", "cfg.yaml"])
def test_a_step_summary_aimed_at_the_users_script_log_or_config_is_not_appended_to(tmp_path, aimed_at):
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "train.log").write_text("step 1 loss 2.3\n")
    (tmp_path / "cfg.yaml").write_text("lr: 0.1\n")
    before = (tmp_path / aimed_at).read_bytes()
    env = dict(os.environ, GITHUB_STEP_SUMMARY=str(tmp_path / aimed_at), GITHUB_ACTIONS="true")
    args = ("check", "--cwd", str(tmp_path), "--only", "log.writable", "--log", str(tmp_path / "train.log"),
            "--format", "github", "--", "python3", "t.py", "--config=cfg.yaml")
    # the script's case through the console script, the others through the same entry here (support/in_process)
    p = dfdoctor(*args, cwd=tmp_path, env=env) if aimed_at == "t.py" else run_here(*args, cwd=tmp_path, full_env=env)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert (tmp_path / aimed_at).read_bytes() == before, "the step summary was appended to the user's file"
    assert "the summary is not appended" in p.stderr, p.stderr


def test_the_step_summary_is_still_appended_to_githubs_own_file(tmp_path):
    (tmp_path / "t.py").write_text("print('hi')\n")
    summary = tmp_path / "step_summary"
    summary.write_text("")
    env = dict(os.environ, GITHUB_STEP_SUMMARY=str(summary), GITHUB_ACTIONS="true")
    p = dfdoctor("check", "--cwd", str(tmp_path), "--only", "log.writable", "--format", "github", "--",
                 "python3", "t.py", cwd=tmp_path, env=env)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "dfdoctor" in summary.read_text()


def test_an_output_naming_the_lines_own_log_is_refused_with_several_targets_too(tmp_path, ssh_config_env):
    """`check` on several targets took another road (fleet.check_many) that never guarded --output against the
    files the lines name: with `local` among the targets, the line's own log here was overwritten by the report."""
    (tmp_path / "t.py").write_text("print('hi')\n")
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n")
    targets = tmp_path / "targets.txt"
    targets.write_text("local\nssh://root@dfdoctor-host\n")
    p = _check(tmp_path, "--targets-file", str(targets), "--format", "json", "--output", str(log),
               "--", "python3 t.py >>train.log 2>&1")
    assert p.returncode == 2 and "it would be overwritten" in p.stderr, p.stdout + p.stderr
    assert log.read_text() == "step 1 loss 2.3\n"
