"""Slurm, observed (issue 24): sbatch's own answer to `--test-only`, the script and the --output patterns read as
sbatch and slurmstepd read them, array jobs judged by every task. Real jobs on the single-node cluster of
tests/infra/slurm.sh; the truth each reading is compared with is what the real sbatch and slurmstepd did."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.slurm import efficiency, patterns, sbatch
from dfdoctor.slurm.job import JobFacts
from infra.slurm_fixtures import slurm  # noqa: F401
from test_slurm import cancel_leftover_jobs, dfd, job_script  # noqa: F401

pytestmark = pytest.mark.slow
DFDOCTOR = [sys.executable, "-m", "dfdoctor"]


def checks(doc: dict) -> dict:
    return {c["id"]: c for c in doc["checks"]}


def findings(rec: dict) -> list[dict]:
    return rec.get("findings") or [rec]


# ---- 1. ask sbatch ----------------------------------------------------------------------------------------

def _crlf(tmp: Path) -> list[str]:
    (tmp / "crlf.sbatch").write_bytes(b"#!/bin/bash\r\necho hi\r\n")
    return ["crlf.sbatch"]


def _no_shebang(tmp: Path) -> list[str]:
    (tmp / "plain.sbatch").write_text("echo hi\n")
    return ["plain.sbatch"]


def _bad_time(tmp: Path) -> list[str]:
    job_script(tmp, "echo hi\n")
    return ["--time=1:2:3:4:5", "job.sbatch"]


def _too_big(tmp: Path) -> list[str]:
    (tmp / "big.sbatch").write_text("#!/bin/bash\n" + ("# " + "x" * 98 + "\n") * 45000 + "echo hi\n")
    return ["big.sbatch"]


@pytest.mark.parametrize("make,said,fix", [
    (_crlf, "DOS line breaks", "sed -i 's/\\r$//'"),
    (_no_shebang, "does not look like a batch script", "#!/bin/bash"),
    (_bad_time, "Invalid --time specification", "HH:MM:SS"),
    (_too_big, "too long", "4 MiB"),
])
def test_what_sbatch_refuses_fails_check_in_its_own_words(slurm, tmp_path, make, said, fix):
    args = make(tmp_path)
    direct = subprocess.run(["sbatch", "--test-only", *args], cwd=tmp_path, capture_output=True, text=True)
    assert direct.returncode != 0 and said in " ".join(direct.stderr.split())  # the truth: sbatch refuses
    rc, doc, _ = dfd("check", "--only", "slurm.*", "--", "sbatch", *args, cwd=tmp_path)
    sub = checks(doc)["slurm.submission"]
    assert rc == 1 and sub["status"] == "fail" and sub["cause"] == "sbatch-refused", sub
    assert said in sub["summary"] and fix in sub["fix"]
    assert doc["verdict"]["cause"] == "sbatch-refused"
    assert doc["verdict"]["summary"].startswith("sbatch refuses"), doc["verdict"]["summary"]  # not "Sbatch"
    rc, doc, _ = dfd("launch", "--", "sbatch", *args, cwd=tmp_path)  # blocked: nothing submitted
    assert rc == 1 and doc["verdict"]["cause"] == "sbatch-refused" and not doc["run"].get("slurm")


def test_what_sbatch_accepts_is_never_blocked_on_a_reading(slurm, tmp_path):
    """`--nodes=2 --ntasks=1` on a one-node cluster: a reading of the partition says it can never start, sbatch
    says "setting nnodes to 1" and the job runs."""
    job_script(tmp_path, "echo ran on $SLURM_JOB_NUM_NODES node\n", header="#SBATCH --nodes=2 --ntasks=1\n")
    rc, doc, _ = dfd("check", "--only", "slurm.*", "--", "sbatch", "job.sbatch", cwd=tmp_path)
    out = checks(doc)
    assert rc == 0 and out["slurm.partition"]["status"] != "fail", out["slurm.partition"]
    assert "setting nnodes to 1" in out["slurm.submission"]["summary"]
    assert f"on {slurm.node} in partition {slurm.partition}" in out["slurm.submission"]["summary"]
    rc, doc, _ = dfd("launch", "--watch", "60", "--", "sbatch", "job.sbatch", cwd=tmp_path)
    assert rc == 0 and doc["verdict"]["state"] == "ok", doc["verdict"]


# ---- 2. the script and the patterns, read as sbatch and slurmstepd read them ------------------------------

def test_late_and_indented_sbatch_lines_are_named_and_not_believed(slurm, tmp_path):
    job_script(tmp_path, "echo start\n#SBATCH -J late-name\n",
               header="#SBATCH -J early-name\n  #SBATCH --comment=indented\n")
    job = slurm.sbatch("job.sbatch", cwd=tmp_path)
    assert slurm.field(job, "JobName") == "early-name" and slurm.field(job, "Comment") in ("", "(null)")
    sub = sbatch.parse(["sbatch", "job.sbatch"], tmp_path, {})
    assert sub.job_name == "early-name" and "comment" not in sub.options
    rc, doc, _ = dfd("check", "--only", "slurm.submission", "--", "sbatch", "job.sbatch", cwd=tmp_path)
    said = " ".join(f["summary"] for f in findings(checks(doc)["slurm.submission"]))
    assert "line 5 `#SBATCH -J late-name` (after the first command (line 4))" in said, said
    assert "line 3 `#SBATCH --comment=indented` (indented" in said


# (pattern as given on the command line or in an #SBATCH line, job name) -> the file slurmstepd opens
PATTERNS = ["plain-%x-%j.out", "pct%%-%j.out", "pad-%5j-%u.out", "odd-%q-%j%", "notarray-%a-%A.out",
            "node-%N-%n-%t-%s.out", "esc\\%j-%x.out", "two\\\\back-%j.out"]


@pytest.mark.parametrize("in_script", [False, True])
def test_output_patterns_resolve_to_the_file_slurmstepd_writes(slurm, tmp_path, in_script):
    """Each pattern is submitted for real; dfdoctor's name for it must be the file that appeared. scontrol's
    StdOut is compared too: it agrees for plain patterns and not for `%%`, widths or backslashes, which is why
    dfdoctor resolves the pattern itself."""
    jobs = []
    for i, pat in enumerate(PATTERNS):
        if in_script:  # in an #SBATCH line sbatch itself takes a backslash as an escape: double it
            body = pat.replace("\\", "\\\\")
            s = job_script(tmp_path, "echo hi\n", name=f"p{i}.sbatch", header=f"#SBATCH -J nm -o '{body}'\n")
            argv = ["sbatch", s.name]
        else:
            argv = ["sbatch", "-J", "nm", "-o", pat, "--wrap", "echo hi"]
        jobs.append((pat, slurm.sbatch(*argv[1:], cwd=tmp_path), sbatch.parse(argv, tmp_path, {})))
    for pat, job, sub in jobs:
        assert sub.get("output") == pat
        assert slurm.wait_state(job, ("COMPLETED",)) == "COMPLETED"
        name = patterns.resolve(pat, job_name="nm", job_id=job, node=slurm.node)
        assert name and (tmp_path / name).is_file(), (pat, name, sorted(os.listdir(tmp_path)))
        assert (tmp_path / name).read_text() == "hi\n"
        scontrol = slurm.field(job, "StdOut")
        if "\\" not in pat and "%%" not in pat and "%5" not in pat and "%N" not in pat and "%a" not in pat:
            assert scontrol == str(tmp_path / name)


def test_a_backslash_in_output_is_checked_where_slurm_writes(slurm, tmp_path):
    """`-o 'logs\\new/x.out'`: the folder `logs\\new` exists, but slurmstepd drops the backslash and opens
    `logsnew/x.out`: the job fails 0:53. `check` must say so, and `launch` must read the right place."""
    (tmp_path / "logs\\new").mkdir()
    job_script(tmp_path, "echo hi\n")
    rc, doc, _ = dfd("check", "--only", "slurm.output", "--", "sbatch", "-o", "logs\\new/x.out", "job.sbatch",
                     cwd=tmp_path)
    out = checks(doc)["slurm.output"]
    assert rc == 1 and out["cause"] == "log-dir-missing" and f"{tmp_path}/logsnew" in out["summary"], out
    rc, doc, _ = dfd("launch", "--force", "--watch", "60", "--", "sbatch", "-o", "logs\\new/x.out", "job.sbatch",
                     cwd=tmp_path)
    assert doc["verdict"]["cause"] == "log-dir-missing" and "logsnew" in doc["verdict"]["summary"], doc["verdict"]


def test_a_backslash_job_that_ended_before_the_first_look_is_read_where_slurm_wrote(slurm, tmp_path):
    """The launch's first look came after the job had failed 0:53 (CI, round 26, a loaded machine): the facts read
    again were scontrol's `logs\\new/x.out`, whose folder exists, and the verdict was signal 53, not the missing
    folder slurmstepd opened. The same look, taken once the job has ended, must read `logsnew/`."""
    from dfdoctor.slurm import rules, watch

    (tmp_path / "logs\\new").mkdir()
    job_script(tmp_path, "echo hi\n")
    jid = subprocess.run(["sbatch", "--parsable", "-o", "logs\\new/x.out", "job.sbatch"], cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout.strip().split(";")[0]
    deadline, said = time.monotonic() + 60, ""
    while "JobState=FAILED" not in said and time.monotonic() < deadline:
        time.sleep(0.2)
        said = subprocess.run(["scontrol", "show", "job", jid], capture_output=True, text=True).stdout
    assert "JobState=FAILED" in said, said
    seen = watch.look(jid, {"output_pattern": "logs\\new/x.out", "error_pattern": ""})  # as the launch's first
    v = rules.output_not_opened(seen)
    assert v is not None and v.cause == "log-dir-missing" and f"{tmp_path}/logsnew" in v.summary, \
        (v, seen.job.stdout)


def test_a_chdir_with_a_backslash_is_looked_at_as_named(slurm, tmp_path):
    """The node-side folder test runs under dash (/bin/sh), whose `echo` turned `\\t` into a tab: a missing
    `--chdir 'wd\\tx'` was never matched, so never reported. printf keeps the name."""
    job_script(tmp_path, "echo hi\n")
    rc, doc, _ = dfd("check", "--only", "slurm.output", "--", "sbatch", "--chdir", str(tmp_path / "wd\\tx"),
                     "job.sbatch", cwd=tmp_path)
    out = checks(doc)["slurm.output"]
    assert rc == 1 and out["cause"] == "log-elsewhere" and "wd\\tx does not exist on node" in out["summary"], out


def test_launch_reads_the_file_a_percent_escape_names(slurm, tmp_path):
    """`%%` in --output: scontrol's StdOut says `crash%%-ID.out`, the job writes `crash%-ID.out`; the verdict
    must come from the job's own traceback."""
    job_script(tmp_path, "python3 -c 'import nosuch_mod_pct'\n")
    rc, doc, _ = dfd("launch", "--no-check", "--watch", "60", "--", "sbatch", "-o", "crash%%-%j.out", "job.sbatch",
                     cwd=tmp_path)
    job = doc["run"]["slurm"]["job_id"]
    assert doc["verdict"]["cause"] == "missing-module", doc["verdict"]
    assert doc["run"]["slurm"]["stdout"] == str(tmp_path / f"crash%-{job}.out")


@pytest.mark.parametrize("pattern,real", [("pct%%-%j.out", "pct%-{job}.out"), ("pad-%7j.out", "pad-{job:0>7}.out")])
def test_status_of_a_job_submitted_elsewhere_reads_the_file_it_wrote(slurm, tmp_path, pattern, real):
    """No pattern recorded (not submitted by dfdoctor): scontrol's StdOut is resolved once more."""
    job = slurm.sbatch("-o", pattern, "--wrap", "python3 -c 'import nosuch_mod_elsewhere'", cwd=tmp_path)
    slurm.wait_state(job, ("FAILED",))
    assert slurm.field(job, "StdOut") != str(tmp_path / real.format(job=job))  # scontrol's name is not the file
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    assert doc["verdict"]["cause"] == "missing-module", doc["verdict"]
    assert doc["run"]["slurm"]["stdout"] == str(tmp_path / real.format(job=job))


# ---- 3. arrays ---------------------------------------------------------------------------------------------

ARRAY = """echo task $SLURM_ARRAY_TASK_ID
if [ "$SLURM_ARRAY_TASK_ID" = 2 ]; then python3 -c 'import nosuch_in_task_two'; fi
"""


def test_an_array_with_one_failed_task_fails_and_names_it(slurm, tmp_path):
    job_script(tmp_path, ARRAY, header="#SBATCH -o arr-%A_%a.out\n")
    rc, doc, _ = dfd("launch", "--no-check", "--watch", "90", "--", "sbatch", "--array=0-3", "job.sbatch",
                     cwd=tmp_path)
    job = doc["run"]["slurm"]["job_id"]
    v = doc["verdict"]
    assert rc == 1 and v["state"] == "failed" and v["cause"] == "missing-module", v
    assert f"Task 2 ({job}_2) failed first" in v["summary"] and "nosuch_in_task_two" in v["summary"]
    assert str(tmp_path / f"arr-{job}_2.out") in v["fix"]
    for t in ("0", "1", "3"):
        slurm.wait_state(f"{job}_{t}", ("COMPLETED",))
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    v = doc["verdict"]
    assert rc == 1 and v["cause"] == "missing-module" and "4 task(s): 3 completed, 1 failed" in v["summary"], v
    rc, doc, err = dfd("status", f"slurm:{job}_2", cwd=tmp_path)  # the task the verdict named (round 3: exit 2)
    assert rc == 1 and doc["verdict"]["cause"] == "missing-module", (err, doc["verdict"])


def test_an_array_whose_tasks_all_complete_is_ok(slurm, tmp_path):
    job_script(tmp_path, "echo task $SLURM_ARRAY_TASK_ID\n", header="#SBATCH -o ok-%A_%a.out\n")
    job = slurm.sbatch("--array=0-2", "job.sbatch", cwd=tmp_path)
    for t in ("0", "1", "2"):
        slurm.wait_state(f"{job}_{t}", ("COMPLETED",))
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    assert rc == 0 and "3 task(s): 3 completed" in doc["verdict"]["summary"], doc["verdict"]


# ---- 8. smaller faults ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("ref", ["slurm:0", "slurm:000", "slurm:0_1", "slurm:12_x", "slurm:_1"])
def test_job_id_zero_is_a_usage_error(ref, tmp_path):
    p = subprocess.run(DFDOCTOR + ["status", ref], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "1 or more" in p.stderr, p.stderr


def test_ctrl_c_after_submission_names_the_job_its_state_and_scancel(slurm, tmp_path):
    job_script(tmp_path, "echo start\nsleep 120\n")
    # Ctrl-C reaches launch as it reaches a user's: a pytest started in the background by a shell ignores SIGINT,
    # and an ignored signal stays ignored in its children (Python then never raises KeyboardInterrupt)
    p = subprocess.Popen(DFDOCTOR + ["launch", "--no-check", "--watch", "100", "--", "sbatch", "job.sbatch"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    end = time.monotonic() + 60
    while time.monotonic() < end and not any('"submitted"' in f.read_text()
                                             for f in tmp_path.glob(".dfdoctor/runs/*/launcher.jsonl")):
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    job = next(line.split()[0] for line in subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True,
                                                          text=True).stdout.splitlines() if str(tmp_path) in line)
    try:
        assert p.returncode == 130, err
        assert f"job {job} was submitted and is " in err and f"`scancel {job}`" in err, err
        assert any(f"is {s}" in err for s in ("PENDING", "RUNNING")), err
    finally:
        slurm.cancel(job)


def test_slurm_nodes_beyond_the_cluster_is_never_starts_at_once(slurm, tmp_path):
    t0 = time.monotonic()
    rc, doc, _ = dfd("check", "--slurm-nodes", "4", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    took = time.monotonic() - t0
    v = doc["verdict"]
    assert rc == 1 and v["cause"] == "never-starts", v
    assert "4 node(s)" in json.dumps(doc) and f"partition {slurm.partition} has 1 node(s)" in json.dumps(doc)
    assert "--slurm-nodes 1" in json.dumps(doc)
    assert took < 20, took  # srun's --immediate waits 30 s before it says "busy"


def test_slurm_nodes_record_is_silenced_by_config(slurm, tmp_path):
    (tmp_path / "dfdoctor.toml").write_text('[[silence]]\ncheck = "slurm.nodes"\ncause = "never-starts"\n'
                                            'reason = "a one-node test cluster"\n')
    rc, doc, _ = dfd("check", "--slurm-nodes", "4", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    (rec,) = [c for c in doc["checks"] if c["id"] == "slurm.nodes"]
    assert rc == 0 and rec["cause"] == "never-starts" and rec["silenced"] == "a one-node test cluster", rec


def test_a_dependency_wait_names_the_job_it_waits_for(slurm, tmp_path):
    first = slurm.sbatch("-o", "first-%j.log", "--wrap", "sleep 60", cwd=tmp_path)
    job_script(tmp_path, "true\n")
    try:
        rc, doc, _ = dfd("launch", "--no-check", "--watch", "3", "--", "sbatch", f"--dependency=afterok:{first}",
                         "-o", "o-%j.log", "job.sbatch", cwd=tmp_path)
        v = doc["verdict"]
        assert v["state"] == "pending" and f"job {first} (afterok:{first}" in v["summary"], v
        assert f"squeue -j {first}" in v["fix"] and "IDS" not in v["fix"]
        assert f"`dfdoctor stop {doc['run']['id']}`" in v["fix"], v  # a pending job may be ended too
    finally:
        slurm.cancel(first)


def test_a_job_cancelled_after_running_is_not_cancelled_before_it_started(slurm, tmp_path):
    job = slurm.sbatch("-o", "o-%j.log", "--wrap", "echo started; sleep 60", cwd=tmp_path)
    slurm.wait_state(job, ("RUNNING",))
    end = time.monotonic() + 30
    while time.monotonic() < end and slurm.field(job, "RunTime") in ("", "00:00:00", "00:00:01"):
        time.sleep(0.2)
    slurm.cancel(job)
    slurm.wait_state(job, ("CANCELLED",))
    (tmp_path / f"o-{job}.log").unlink()  # as when the output is on a disk this host does not see
    rc, doc, _ = dfd("status", f"slurm:{job}", cwd=tmp_path)
    s = doc["verdict"]["summary"]
    assert rc == 1 and "before it started" not in s and "after it had run 00:00:0" in s, s
    assert f"sacct -j {job} " in doc["verdict"]["fix"]


def test_a_failed_step_behind_exit_0_is_step_failed_with_the_steps_error(slurm, tmp_path):
    job_script(tmp_path, "srun python3 -c 'import nosuch_in_step'\necho carried on\nexit 0\n")
    rc, doc, _ = dfd("launch", "--no-check", "--watch", "60", "--", "sbatch", "-o", "o-%j.log", "job.sbatch",
                     cwd=tmp_path)
    v = doc["verdict"]
    assert rc == 1 and v["cause"] == "step-failed" and "No module named 'nosuch_in_step'" in v["summary"], v


# ---- 6. what seff tells ---------------------------------------------------------------------------------

def test_a_finished_job_says_how_much_of_its_request_it_used(slurm, tmp_path):
    body = "python3 -c 'import time\nb = bytearray(80 << 20)\nt = time.time()\nwhile time.time() - t < 5: pass'\n"
    job_script(tmp_path, body)
    rc, doc, _ = dfd("launch", "--no-check", "--watch", "60", "--", "sbatch", "-c", "2", "--mem=400M",
                     "-o", "o-%j.log", "job.sbatch", cwd=tmp_path)
    job = doc["run"]["slurm"]["job_id"]
    s = doc["verdict"]["summary"]
    assert rc == 0 and "CPU efficiency" in s and "memory efficiency" in s, s
    row = subprocess.run(["sacct", "-j", job, "-P", "-n", "-X", "--format=TotalCPU,AllocCPUS,ElapsedRaw"],
                         capture_output=True, text=True).stdout.split("|")
    assert f"of 2 core(s) x {row[2].strip()} s" in s
    pct = int(re.search(r"memory efficiency (\d+)%", s)[1])
    assert 15 <= pct <= 40, s  # 80 MiB (plus python) of 400M


def test_a_job_too_short_for_accounting_is_not_given_an_unknown_length():
    """Round 6 left "the job of ? s was too short" where sacct gave no elapsed time."""
    short = JobFacts("7", state="COMPLETED", req_mem="400M", source=["sacct"])
    assert efficiency.summary(short) == ("memory use not recorded (MaxRSS is sampled every 2 s or so; the job "
                                         "was too short), of 400M asked")
    short.elapsed_s = 1
    assert "the job of 1 s was too short" in efficiency.summary(short)


def test_a_running_job_gets_a_next_line_that_follows_its_output(slurm, tmp_path):
    job_script(tmp_path, "for i in $(seq 1 60); do echo step $i; sleep 0.3; done\n")
    rc, doc, _ = dfd("launch", "--no-check", "--", "sbatch", "-o", "run-%j.log", "job.sbatch", cwd=tmp_path)
    job = doc["run"]["slurm"]["job_id"]
    try:
        assert doc["verdict"]["state"] == "running"
        assert f"tail -f {tmp_path}/run-{job}.log" in doc["verdict"]["fix"], doc["verdict"]
        # ending it: the stop that cancels it and notes it in the run folder, so status says who stopped it
        assert doc["verdict"]["fix"].endswith(f"To end the whole job: `dfdoctor stop {doc['run']['id']}`."), doc["verdict"]
    finally:
        slurm.cancel(job)


# ---- 4. the job's environment ---------------------------------------------------------------------------------

@pytest.mark.parametrize("export,shell_has_it", [
    (["--export=NONE"], True), ([], True), (["--export=ALL"], True), (["--export=PYTHONPATH"], True),
    (["--export=HOME"], True), (["--export=NONE", "--export-file=vars.env"], True),
    (["--export-file=vars.env"], False), (["--export-file=lines.env"], False), ([], False)])
def test_node_checks_see_the_environment_the_job_gets(slurm, tmp_path, export, shell_has_it):
    """A module found only through the submitting shell's PYTHONPATH: `check` must pass exactly when the real
    job (submitted with the same options) can import it."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "only_on_pythonpath_x.py").write_text("X = 1\n")
    (tmp_path / "vars.env").write_text(f"PYTHONPATH={mods}\0")
    (tmp_path / "lines.env").write_text(f"PYTHONPATH={mods}\nOTHER=1\n")  # 22.05 splits at NUL only
    job_script(tmp_path, "python3 -c 'import only_on_pythonpath_x'\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if shell_has_it:
        env["PYTHONPATH"] = str(mods)
    real = slurm.sbatch(*export, "-o", "real-%j.out", "job.sbatch", cwd=tmp_path, env=env)
    rc, doc, _ = dfd("check", "--only", "imports.smoke", "--", "sbatch", *export, "job.sbatch", cwd=tmp_path,
                     env=env)
    state = slurm.wait_state(real, ("COMPLETED", "FAILED"))
    smoke = checks(doc)["imports.smoke"]
    assert (state == "COMPLETED") == (smoke["status"] == "ok"), (state, smoke)
    assert (rc == 0) == (state == "COMPLETED")
    assert "run with the job's environment" in " ".join(smoke["evidence"])


# ---- 5. Slurm checks are checks ------------------------------------------------------------------------------

SLURM_IDS = {"slurm.submission", "slurm.partition", "slurm.output", "slurm.gpus", "slurm.training", "slurm.nodes"}


def test_slurm_checks_are_listed_and_known_to_only(tmp_path):
    p = subprocess.run(DFDOCTOR + ["list-checks", "--format", "json"], capture_output=True, text=True, timeout=60)
    assert SLURM_IDS <= {c["id"] for c in json.loads(p.stdout)["checks"]}
    job_script(tmp_path, "true\n")
    p = subprocess.run(DFDOCTOR + ["check", "--only", "nosuch.*", "--", "sbatch", "job.sbatch"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and all(i in p.stderr for i in SLURM_IDS), p.stderr


def test_slurm_checks_are_silenced_by_config_and_named_in_sarif_and_junit(slurm, tmp_path):
    (tmp_path / "crlf.sbatch").write_bytes(b"#!/bin/bash\r\necho hi\r\n")
    rc, doc, _ = dfd("check", "--only", "slurm.submission", "--format", "sarif", "--output",
                     str(tmp_path / "r.sarif"), "--format", "junit", "--output", str(tmp_path / "r.xml"),
                     "--", "sbatch", "crlf.sbatch", cwd=tmp_path)
    assert rc == 1
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    assert any(r.get("ruleId") == "slurm.submission" for r in sarif["runs"][0]["results"]), sarif
    assert 'name="slurm.submission"' in (tmp_path / "r.xml").read_text()
    (tmp_path / "dfdoctor.toml").write_text('[[silence]]\ncheck = "slurm.submission"\ncause = "sbatch-refused"\n'
                                            'reason = "CRLF on purpose for this test"\n')
    rc, doc, _ = dfd("check", "--only", "slurm.submission", "--", "sbatch", "crlf.sbatch", cwd=tmp_path)
    sub = checks(doc)["slurm.submission"]
    assert rc == 0 and sub["status"] == "fail" and sub["silenced"] == "CRLF on purpose for this test", sub


def test_slurm_checks_run_under_the_runners_timeout(slurm, tmp_path):
    """slurm.training's srun runs checks on the node that take 20 s (a module that sleeps at import); a 3 s
    per-check timeout from the config kills the check, and the srun allocation it leaves is cancelled."""
    (tmp_path / "slow_import_mod.py").write_text("import time\ntime.sleep(20)\n")
    (tmp_path / "train.py").write_text("import slow_import_mod\n")
    (tmp_path / "dfdoctor.toml").write_text('[checks."slurm.training"]\ntimeout = 3\n')
    job_script(tmp_path, "python3 train.py\n")
    t0 = time.monotonic()
    rc, doc, _ = dfd("check", "--", "sbatch", "-o", "o-%j.log", "job.sbatch", cwd=tmp_path)
    training = checks(doc)["slurm.training"]
    assert training["status"] == "timeout" and "3 s timeout" in training["summary"], training
    assert time.monotonic() - t0 < 18  # not the 20 s the node's checks would have taken
    end = time.monotonic() + 15  # the srun the check started went with it: no job of ours is left
    while time.monotonic() < end and str(tmp_path) in subprocess.run(
            ["squeue", "-h", "-o", "%Z"], capture_output=True, text=True).stdout:
        time.sleep(0.2)
    assert str(tmp_path) not in subprocess.run(["squeue", "-h", "-o", "%Z"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("only,ids", [
    ("slurm.*", {"slurm.submission", "slurm.partition", "slurm.output", "slurm.gpus"}),  # no srun on a node
    ("imports.smoke", {"imports.smoke"}),
])
def test_only_picks_slurm_checks_and_node_checks_by_id(slurm, tmp_path, only, ids):
    job_script(tmp_path, "python3 -c 'print(1)'\n")
    rc, doc, _ = dfd("check", "--only", only, "--", "sbatch", "-o", "o-%j.log", "job.sbatch", cwd=tmp_path)
    assert rc == 0 and set(checks(doc)) == ids, set(checks(doc))
