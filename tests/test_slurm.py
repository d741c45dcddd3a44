"""Slurm on a real single-node cluster (tests/infra/slurm.sh): every failure mode is a real job, submitted by
`dfdoctor launch -- sbatch ...` or directly, judged from what slurmctld, slurmdbd and the output file say."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dfdoctor.slurm import patterns, sbatch, script
from infra.slurm_fixtures import slurm  # noqa: F401
from support.tty import left_on_screen, on_tty

DFDOCTOR = [sys.executable, "-m", "dfdoctor"]


@pytest.fixture(autouse=True)
def cancel_leftover_jobs(tmp_path):
    """A job a failed test left running is cancelled (it would outlive the test session otherwise)."""
    yield
    q = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True, timeout=30)
    mine = [line.split()[0] for line in q.stdout.splitlines() if str(tmp_path) in line]
    if mine:
        subprocess.run(["scancel", *mine], capture_output=True, timeout=30)
        end = time.monotonic() + 20
        while time.monotonic() < end and any(
                j in subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
                for j in mine):
            time.sleep(0.3)


def dfd(*args: str, cwd: Path, env: dict | None = None, timeout: float = 200) -> tuple[int, dict, str]:
    """Run dfdoctor; (exit code, its JSON report, its stderr)."""
    out = cwd / f"report-{time.monotonic_ns()}.json"
    cmd, rest = list(args[:1]), list(args[1:])
    p = subprocess.run(DFDOCTOR + cmd + ["--format", "json", "--output", str(out)] + rest, cwd=cwd,
                       capture_output=True, text=True, timeout=timeout, env=env)
    doc = json.loads(out.read_text()) if out.exists() else {}
    return p.returncode, doc, p.stderr


def job_script(tmp: Path, body: str, name: str = "job.sbatch", header: str = "") -> Path:
    p = tmp / name
    p.write_text("#!/bin/bash\n" + textwrap.dedent(header) + textwrap.dedent(body))
    return p


def launch(tmp: Path, *sbatch_args: str, watch: str = "60") -> dict:
    rc, doc, err = dfd("launch", "--no-check", "--watch", watch, "--", "sbatch", *sbatch_args, cwd=tmp)
    assert doc, err
    return doc


def job_of(doc: dict) -> str:
    return doc["run"]["slurm"]["job_id"]


# ---- reading a submission (no cluster needed) ------------------------------------------------------------

def test_options_follow_sbatchs_precedence(tmp_path):
    s = job_script(tmp_path, "echo hi\n#SBATCH -p ignored-after-a-command\n",
                   header="#SBATCH -J from-script\n#SBATCH --mem=1G -t 10\n#SBATCH --output=logs/%x-%j.out\n")
    sub = sbatch.parse(["sbatch", str(s)], tmp_path, {})
    assert (sub.job_name, sub.get("mem"), sub.get("time"), sub.get("output")) == ("from-script", "1G", "10",
                                                                                  "logs/%x-%j.out")
    assert "partition" not in sub.options  # #SBATCH after the first command is not read by sbatch
    sub = sbatch.parse(["sbatch", str(s)], tmp_path, {"SBATCH_JOB_NAME": "from-env"})
    assert sub.job_name == "from-env" and sub.origin["job-name"] == "SBATCH_JOB_NAME"
    sub = sbatch.parse(["sbatch", "-J", "from-cli", "--mem=2G", str(s), "arg"], tmp_path,
                       {"SBATCH_JOB_NAME": "from-env"})
    assert (sub.job_name, sub.get("mem"), sub.script_args) == ("from-cli", "2G", ["arg"])


def test_patterns_resolve_what_is_known_before_submission():
    assert patterns.expand("logs/%x-%j.out", job_name="train", user="u") == "logs/train-%j.out"
    assert patterns.expand("%u/%x_%A_%a.%3j", job_name="t", user="u", job_id="7", array=True) == "u/t_7_%a.007"
    # slurmstepd writes %a of a job that is no array as Slurm's NO_VAL (measured on 22.05)
    assert patterns.expand("%x_%a", job_name="t", user="u", job_id="7") == "t_4294967294"
    assert patterns.folder("logs/%x-%j.out") == "logs" and patterns.folder("run-%j/out.log") is None


def test_script_is_followed_to_the_training_command():
    t = script.find("module load x\nexport A=1\nsrun --ntasks-per-node=1 -c 4 torchrun --nproc_per_node=4 "
                    "train.py --lr 1\n")
    assert t.srun and t.argv[:2] == ("torchrun", "--nproc_per_node=4") and t.nproc_per_node == "4"
    assert script.find("cd x && python -m pkg.train\n").argv == ("python", "-m", "pkg.train")


# ---- against the real cluster --------------------------------------------------------------------------

def test_parse_agrees_with_real_sbatch_on_precedence(slurm, tmp_path):
    s = job_script(tmp_path, "true\n", header="#SBATCH -J from-script\n#SBATCH -o from-script-%j.out\n")
    env = dict(os.environ, SBATCH_JOB_NAME="from-env")
    job = slurm.sbatch("-o", "from-cli-%j.out", str(s), cwd=tmp_path, env=env)
    sub = sbatch.parse(["sbatch", "-o", "from-cli-%j.out", str(s)], tmp_path, env)
    assert slurm.field(job, "JobName") == sub.job_name == "from-env"
    assert slurm.field(job, "StdOut") == str(tmp_path / patterns.expand(sub.get("output"), job_name=sub.job_name,
                                                                        job_id=job))


def test_check_finds_missing_output_folder_and_chdir_on_the_node(slurm, tmp_path):
    s = job_script(tmp_path, "python3 -c 'print(1)'\n", header="#SBATCH -o nosuch/%x-%j.out\n")
    rc, doc, _ = dfd("check", "--", "sbatch", "--chdir", str(tmp_path / "nowork"), str(s), cwd=tmp_path)
    out = {c["id"]: c for c in doc["checks"]}
    assert rc == 1 and out["slurm.output"]["status"] == "fail"
    causes = {f["cause"] for f in out["slurm.output"]["findings"]}
    assert {"log-elsewhere", "log-dir-missing"} <= causes
    assert f"on node {slurm.node}" in out["slurm.output"]["summary"]


def test_check_says_a_job_can_never_start(slurm, tmp_path):
    s = job_script(tmp_path, "srun torchrun --nproc_per_node=4 train.py\n", header="#SBATCH --gpus-per-node=2\n")
    rc, doc, _ = dfd("check", "--only", "slurm.*", "--", "sbatch", "-c", str(slurm.cpus * 4), "-N", "2", str(s),
                     cwd=tmp_path)
    out = {c["id"]: c for c in doc["checks"]}
    assert rc == 1 and out["slurm.partition"]["cause"] == "never-starts"
    assert "2 node(s)" in out["slurm.partition"]["summary"] and "CPU(s) per node" in out["slurm.partition"]["summary"]
    assert out["slurm.gpus"]["status"] == "warn"  # a static reading: never more than a warning


def test_check_runs_the_usual_checks_on_a_node(slurm, tmp_path):
    (tmp_path / "train.py").write_text("import nosuchmodule_dfd\n")
    s = job_script(tmp_path, "srun python3 train.py\n", header=f"#SBATCH -o {tmp_path}/%j.out\n")
    rc, doc, _ = dfd("check", "--", "sbatch", str(s), cwd=tmp_path)
    imp = next(c for c in doc["checks"] if c["id"] == "imports.smoke")
    assert rc == 1 and imp["data"]["node"] == slurm.node and imp["summary"].startswith(f"on {slurm.node}:")
    assert "nosuchmodule_dfd" in json.dumps(imp)


def test_launch_blocks_missing_output_folder_and_force_shows_what_slurm_does(slurm, tmp_path):
    s = job_script(tmp_path, "echo hi\n")
    rc, doc, _ = dfd("launch", "--only", "slurm.*", "--", "sbatch", "-o", "nodir/out.log", str(s), cwd=tmp_path)
    assert rc == 1 and doc["verdict"]["cause"] == "log-dir-missing" and "Not submitted" in doc["verdict"]["summary"]
    doc = launch(tmp_path, "-o", "nodir/out-%j.log", str(s))
    job = job_of(doc)
    assert doc["verdict"]["cause"] == "log-dir-missing"
    assert str(tmp_path / f"nodir/out-{job}.log") in doc["verdict"]["summary"]  # the path as Slurm resolved it


def test_missing_error_folder_alone(slurm, tmp_path):
    s = job_script(tmp_path, "echo hi\n")
    doc = launch(tmp_path, "-o", "out-%j.log", "-e", "noerr/err.log", str(s))
    assert doc["verdict"]["cause"] == "log-dir-missing" and "noerr/err.log" in doc["verdict"]["summary"]


def test_missing_chdir_is_log_elsewhere(slurm, tmp_path):
    s = job_script(tmp_path, "echo hi > rel.log\n")
    doc = launch(tmp_path, "-o", f"{tmp_path}/o-%j.log", "-D", str(tmp_path / "gone"), str(s))
    assert doc["verdict"]["cause"] == "log-elsewhere" and "/tmp" in doc["verdict"]["summary"]


@pytest.mark.parametrize("under_srun", [False, True])
def test_out_of_memory_in_the_job_or_only_in_a_step(slurm, tmp_path, under_srun):
    run = "srun " if under_srun else ""
    s = job_script(tmp_path, f"{run}python3 -c 'x = bytearray(400 << 20); import time; time.sleep(2)'\n")
    doc = launch(tmp_path, "--mem=100M", "-o", "o-%j.log", str(s))
    assert doc["verdict"]["cause"] == "oom-killed", doc["verdict"]
    assert "100M" in doc["verdict"]["summary"]
    if under_srun:
        assert doc["run"]["slurm"]["state"] == "FAILED" and "step" in doc["verdict"]["summary"]


def test_python_traceback_from_the_jobs_own_stderr(slurm, tmp_path):
    (tmp_path / "train.py").write_text("print('epoch 1', flush=True)\nprint('epoch 2')\nprint('e3')\n"
                                       "raise ValueError('bad lr')\n")
    s = job_script(tmp_path, "python3 train.py\n")
    doc = launch(tmp_path, "-o", "o-%j.log", "-e", "e-%j.log", str(s))
    assert doc["verdict"]["cause"] == "crashed" and "ValueError: bad lr" in doc["verdict"]["summary"]
    assert "train.py, line 4" in doc["verdict"]["summary"]


def test_missing_module_on_the_node(slurm, tmp_path):
    s = job_script(tmp_path, "srun python3 -c 'import nosuchmod_dfd'\n")
    doc = launch(tmp_path, "-o", "o-%j.log", str(s))
    assert doc["verdict"]["cause"] == "missing-module"


def test_batch_exits_0_after_a_failed_step(slurm, tmp_path):
    s = job_script(tmp_path, "srun python3 -c 'import sys; sys.exit(3)'\nexit 0\n")
    doc = launch(tmp_path, "-o", "o-%j.log", str(s))
    assert doc["verdict"]["cause"] == "step-failed" and "3:0" in json.dumps(doc["verdict"])


@pytest.mark.parametrize("how,sig", [("kill -9 $$", "SIGKILL"), ("exec python3 -c 'import os; os.kill(os.getpid(), 9)'", "SIGKILL"),
                                     ("python3 -c 'import ctypes; ctypes.string_at(0)'", "SIGSEGV")])
def test_killed_by_signal(slurm, tmp_path, how, sig):
    s = job_script(tmp_path, "python3 -c 'import os; os.kill(os.getpid(), 9)'\n" if how.startswith("kill")
                   else how + "\n")
    doc = launch(tmp_path, "-o", "o-%j.log", str(s))
    assert doc["verdict"]["cause"] == "killed-by-signal" and sig in doc["verdict"]["summary"], doc["verdict"]


def test_cancelled_says_by_whom(slurm, tmp_path):
    s = job_script(tmp_path, "echo started; sleep 60\n")
    job = slurm.sbatch("-o", "o-%j.log", str(s), cwd=tmp_path)
    slurm.wait_state(job, ("RUNNING",))
    slurm.cancel(job)
    slurm.wait_state(job, ("CANCELLED",))
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    assert rc == 1 and "cancelled by root" in doc["verdict"]["summary"] and doc["verdict"]["cause"] == "cancelled"


# Slurm gives -N 2 on one node PartitionNodeLimit or PartitionConfig, depending on when it last looked.
@pytest.mark.parametrize("args,reasons", [(("-c", "64"), ("PartitionConfig",)),
                                          (("-N", "2"), ("PartitionNodeLimit", "PartitionConfig"))])
def test_pending_forever(slurm, tmp_path, args, reasons):
    s = job_script(tmp_path, "true\n")
    doc = launch(tmp_path, *args, "-o", "o-%j.log", str(s), watch="10")
    try:
        assert doc["verdict"]["state"] == "pending" and doc["verdict"]["cause"] == "never-starts"
        assert any(r in doc["verdict"]["summary"] for r in reasons) and "never start" in doc["verdict"]["summary"]
    finally:
        slurm.cancel(job_of(doc))


def test_dependency_never_satisfied(slurm, tmp_path):
    bad = slurm.sbatch("-o", "o-%j.log", "--wrap", "exit 1", cwd=tmp_path)
    slurm.wait_state(bad, ("FAILED",))
    s = job_script(tmp_path, "true\n")
    doc = launch(tmp_path, f"--dependency=afterok:{bad}", "-o", "o-%j.log", str(s), watch="10")
    try:
        assert doc["verdict"]["cause"] == "never-starts" and "DependencyNeverSatisfied" in doc["verdict"]["summary"]
    finally:
        slurm.cancel(job_of(doc))


def test_running_with_its_log_growing_then_status_later(slurm, tmp_path):
    s = job_script(tmp_path, "for i in $(seq 1 40); do echo step $i; sleep 0.3; done\n")
    rc, doc, _ = dfd("launch", "--no-check", "--", "sbatch", "-o", "o-%j.log", str(s), cwd=tmp_path)
    job = job_of(doc)
    try:
        assert rc == 0 and doc["verdict"]["state"] == "running" and "grows" in doc["verdict"]["summary"]
    finally:
        slurm.cancel(job)
    slurm.wait_state(job, ("CANCELLED",))
    rc, later, _ = dfd("status", cwd=tmp_path)  # the latest run: this one, judged again now it ended
    assert rc == 1 and "cancelled" in later["verdict"]["summary"]


def test_the_watch_shows_the_queue_then_the_output_on_a_terminal(slurm, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k != "CI"}, "TERM": "xterm", "NO_COLOR": "1"}
    pending = on_tty([*DFDOCTOR, "launch", "--no-check", "--watch", "5", "--", "sbatch", "-c", "64", "-o", "o-%j.log",
                      str(job_script(tmp_path, "true\n"))], tmp_path, env=env)
    assert "dfdoctor launch: PENDING" in pending and re.search(r"watching the job for \d+ s: in Slurm's queue", pending)
    s = job_script(tmp_path, "sleep 1; for i in $(seq 1 60); do echo step $i; sleep 0.3; done\n", name="grows.sbatch")
    out = on_tty([*DFDOCTOR, "launch", "--no-check", "--settle", "3", "--", "sbatch", "-o", "g-%j.log", str(s)],
                 tmp_path, env=env)
    assert "dfdoctor launch: RUNNING" in out, out
    said = re.findall(r"watching the job for \d+ s: ([^\r\x1b]*)", out)
    assert any(w.startswith(f"running on {slurm.node}: waiting for 3 s of steady output") for w in said), said
    for shown in (pending, out):
        assert not [line for line in left_on_screen(shown) if "watching the job" in line], shown


def test_completed_job_and_status_of_a_job_submitted_elsewhere(slurm, tmp_path):
    job = slurm.sbatch("-o", "o-%j.log", "--wrap", "echo done", cwd=tmp_path)
    slurm.wait_state(job, ("COMPLETED",))
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    assert rc == 0 and doc["verdict"]["state"] == "ok"


@pytest.mark.slow
def test_time_limit(slurm, tmp_path):
    """Slurm's own time limit ends the job (TIMEOUT, "DUE TO TIME LIMIT"), watched by launch. The job asks for
    --time=1, the least sbatch takes; once it runs, its limit is lowered to what it has run (`scontrol update
    TimeLimit=0`), so slurmctld's next limit check (every 30 s) ends it: the same TIMEOUT, a minute sooner."""
    s = job_script(tmp_path, "echo start; sleep 200\n")
    out = tmp_path / "launch.json"
    launching = subprocess.Popen(DFDOCTOR + ["launch", "--no-check", "--watch", "150", "--format", "json", "--output",
                                             str(out), "--", "sbatch", "--time=1", "-o", "o-%j.log", str(s)],
                                 cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        job, end = "", time.monotonic() + 60
        while not job and time.monotonic() < end and launching.poll() is None:
            q = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True, timeout=30)
            job = next((ln.split()[0] for ln in q.stdout.splitlines() if ln.endswith(str(tmp_path))), "")
            time.sleep(0.2)
        assert job and slurm.wait_state(job, ("RUNNING",)) == "RUNNING", (job, launching.poll())
        subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=0"], check=True, capture_output=True,
                       timeout=30)
        err = launching.communicate(timeout=200)[1]
    finally:
        launching.kill()
        launching.wait()
    doc = json.loads(out.read_text()) if out.exists() else {}
    assert doc, err
    if doc["verdict"]["state"] == "running":
        # slurmctld checks limits every 30 s and a loaded 2-core CI machine can be later still (CI saw a
        # job still running at 150 s): wait for Slurm's own TIMEOUT, then ask again.
        job = job_of(doc)
        assert slurm.wait_state(job, ("TIMEOUT",), timeout=240) == "TIMEOUT", slurm.state(job)
        rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    assert doc["verdict"]["cause"] == "time-limit", doc["verdict"]


# ---- every node of an allocation at once (one node here: a row per node, the difference injected) --------

def test_check_on_every_node_of_a_new_allocation(slurm, tmp_path):
    rc, doc, _ = dfd("check", "--slurm-nodes", "1", "--only", "imports.smoke", "--", "python3", "-c", "import json",
                     cwd=tmp_path)
    assert rc == 0 and [t["target"] for t in doc["targets"]] == [f"node:{slurm.node}"]
    assert {c["target"] for c in doc["checks"]} == {f"node:{slurm.node}"}


def test_check_inside_salloc_shows_the_node_that_differs(slurm, tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "dfd_nodelib.py").write_text("raise ImportError('this node has a broken nodelib')\n")
    out = tmp_path / "nodes.json"
    env = dict(os.environ, PYTHONPATH=str(shadow))  # what one node's environment would differ by
    p = subprocess.run(["salloc", "-N1", "--mem=3G", *DFDOCTOR, "check", "--slurm-nodes", "all", "--only",
                        "imports.smoke", "--format", "json", "--output", str(out), "--format", "html", "--output",
                        str(tmp_path / "nodes.html"), "--", "python3", "-c", "import dfd_nodelib"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=200, env=env)
    doc = json.loads(out.read_text())
    row = doc["targets"][0]
    assert p.returncode == 1 and row["target"] == f"node:{slurm.node}" and row["verdict"]["state"] == "failed"
    assert "broken nodelib" in json.dumps(doc["checks"]) and f"node:{slurm.node}" in doc["verdict"]["summary"]
    assert f"node:{slurm.node}" in (tmp_path / "nodes.html").read_text()


def test_slurm_nodes_all_outside_an_allocation_is_bad_usage(slurm, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = subprocess.run([*DFDOCTOR, "check", "--slurm-nodes", "all", "--", "python3", "-c", "1"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "inside an allocation" in p.stderr


def test_launcher_option_reads_a_batch_script(slurm, tmp_path):
    job_script(tmp_path, "srun python3 -c 'print(1)'\n", name="train.sbatch",
                   header="#SBATCH -c 64\n#SBATCH -o logs/%x-%j.out\n")
    rc, doc, _ = dfd("check", "--launcher", "train.sbatch", "--only", "slurm.*", cwd=tmp_path)
    out = {c["id"]: c for c in doc["checks"]}
    assert rc == 1 and out["slurm.partition"]["cause"] == "never-starts"
    assert out["slurm.output"]["cause"] == "log-dir-missing" and "logs/train.sbatch-%j.out" in out["slurm.output"]["summary"]


@pytest.mark.parametrize("ref", ["slurm:12a", "slurm:\u00b2\u00b3", "slurm:\u0661\u0662", "slurm:"])
def test_status_of_a_slurm_id_that_is_not_ascii_digits_is_a_usage_error(ref, tmp_path):
    """`str.isdigit` takes '²³' and Arabic-Indic digits; a job id is ASCII digits, anything else is exit 2 before
    anything is asked of Slurm."""
    from conftest import run_dfdoctor
    from support.in_process import run_here

    # the first through the console script, the others through the same entry here (their words decoded alike)
    res = (run_dfdoctor if ref == "slurm:12a" else run_here)("status", ref, cwd=tmp_path)
    assert res.returncode == 2 and "a Slurm job id is a number" in res.stderr, (res.returncode, res.stderr)


def test_numbers_in_a_job_script_that_are_not_ascii_digits_crash_no_check(slurm, tmp_path):
    """'²' passes str.isdigit but not int(): every number read from a user's script (gpus, time, torchrun's
    --nproc_per_node) is read as ASCII digits or as "not a number", so each Slurm check still ends in a finding
    of its own, never in `error` ("crashed: ValueError"), and --slurm-nodes ² is one line and exit 2."""
    s = job_script(tmp_path, "srun torchrun --nproc_per_node \u00b2 train.py\n", name="train.sbatch",
                   header="#SBATCH --gpus-per-node=\u00b2\n#SBATCH --time=\u00b2:00\n")
    (tmp_path / "train.py").write_text("print(1)\n")
    rc, doc, err = dfd("check", "--only", "slurm.*", "--", "sbatch", str(s), cwd=tmp_path)
    assert doc, err
    crashed = [(c["id"], c["summary"]) for c in doc["checks"] if c["status"] == "error"]
    assert not crashed and rc in (0, 1), crashed
    p = subprocess.run([*DFDOCTOR, "check", "--slurm-nodes", "\u00b2", "--", "python3", "-c", "1"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--slurm-nodes \u00b2: a node count" in p.stderr, (p.returncode, p.stderr)


def test_whole_numbers_are_ascii_digits_only():
    from dfdoctor.numbers import is_whole, whole
    assert whole("42") == 42 and whole("\u00b2") is None and whole("\u0661\u0662", -1) == -1 and whole("") is None
    assert not is_whole(None) and not is_whole("4 2") and not is_whole("-1") and is_whole("007")
