"""A RUNNING Slurm job whose output is quiet, looked at on its node (issue 23): its processes sampled through
`srun --overlap --jobid` and named by the same rules as a local job's, on the real single-node cluster
(tests/infra/slurm.sh). Each job is a real batch script; every one is cancelled afterwards."""

from __future__ import annotations

import os
import re
import shlex
import time
from pathlib import Path

import pytest

from dfdoctor.slurm import onnode
from dfdoctor.slurm import watch as slurm_watch
from infra.slurm_fixtures import slurm  # noqa: F401
from jobs.harness import wait_for
from test_slurm import cancel_leftover_jobs, dfd, job_of, job_script  # noqa: F401

JOBS = Path(__file__).resolve().parent / "jobs"
NAMED_WITHIN_S = 30.0


def _env() -> dict:
    """This machine sets PYTHONUNBUFFERED=1, and sbatch exports the caller's environment to the job: without
    it the job's Python buffers as a user's would."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _launch(tmp: Path, body: str, watch: str = "60") -> tuple[int, dict, float]:
    s = job_script(tmp, body)
    t0 = time.monotonic()
    rc, doc, err = dfd("launch", "--no-check", "--watch", watch, "--format", "text", "--", "sbatch", "-o",
                       "o-%j.log", str(s), cwd=tmp, env=_env())
    assert doc, err
    return rc, doc, time.monotonic() - t0


def _text(doc: dict) -> str:
    v = doc["verdict"]
    return "\n".join([f"{v['state']} {v['cause']}", v["summary"], v["fix"], *v["evidence"]])


def _cancel(slurm, doc: dict) -> None:
    job = job_of(doc)
    slurm.cancel(job)
    slurm.wait_state(job, ("CANCELLED", "COMPLETED", "FAILED"))


PY = "python3"  # the node's python (the job's own), not dfdoctor's


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sleep", "input", "lock"])
def test_a_running_batch_job_that_waits_is_named_from_its_node(slurm, tmp_path, case):
    lock = tmp_path / "data.lock"
    body, cause, state, line = {
        "sleep": (f"{PY} -u {JOBS / 'sleeps.py'}\n", "sleeping", "running", "sleeps.py:5"),  # no failure
        "input": (f"sleep 300 | {PY} -u {JOBS / 'asks_input.py'}\n", "waiting-for-input", "failed",
                  "asks_input.py:3"),
        "lock": (f"flock {shlex.quote(str(lock))} sleep 300 &\nsleep 1\n{PY} -u {JOBS / 'takes_lock.py'} "
                 f"{shlex.quote(str(lock))}\n", "waiting-on-lock", "failed", "takes_lock.py:7"),
    }[case]
    rc, doc, took = _launch(tmp_path, body)
    try:
        v, text = doc["verdict"], _text(doc)
        assert (v["state"], v["cause"]) == (state, cause), text
        assert rc == (0 if state == "running" else 1) and took < NAMED_WITHIN_S + 10, (rc, took, text)
        assert v["summary"].startswith(f"Job {job_of(doc)} on {slurm.node}, its output file"), v["summary"]
        assert any(line in e and "(python3)" in e for e in v["evidence"]), text  # the process and its line
        assert f"scancel {job_of(doc)}" in v["fix"] and not any("kill " in e for e in v["evidence"]), text
        if case == "lock":
            assert "(flock " in v["summary"] and "holds it" in v["summary"], v["summary"]  # the holder, named
        assert any(t["event"] == "stacks-sampled" for t in doc["timeline"]), doc["timeline"]
    finally:
        _cancel(slurm, doc)


@pytest.mark.slow
def test_a_batch_python_without_u_that_works_is_output_buffered_then_status_says_so_again(slurm, tmp_path):
    """`python3 train.py` in an sbatch script, no -u, no PYTHONUNBUFFERED: it works, its output file stays
    empty. Not running-and-fine, not failed: unknown, with the -u / PYTHONUNBUFFERED fix marked not tried."""
    rc, doc, took = _launch(tmp_path, f"{PY} {JOBS / 'works_buffered.py'}\n")
    try:
        v, text = doc["verdict"], _text(doc)
        assert (v["state"], v["cause"]) == ("unknown", "output-buffered") and rc == 1, text
        # the file holds only the warning its stderr wrote at the start (-o: stdout and stderr in one file)
        assert "has not changed for" in v["summary"] and "block buffer" in v["summary"], v["summary"]
        out = next(tmp_path.glob("o-*.log")).read_text()
        assert out.strip() == "UserWarning: something at import", out
        assert "-u " + str(JOBS / "works_buffered.py") in v["fix"] and "PYTHONUNBUFFERED=1" in v["fix"], v["fix"]
        assert "(not tried)" in v["fix"], v["fix"]
        assert any("works_buffered.py" in e and "(python3)" in e for e in v["evidence"]), text
        assert took < 10 + NAMED_WITHIN_S, took
        rc, later, _ = dfd("status", f"slurm:{job_of(doc)}", cwd=tmp_path)  # a job seen for the first time
        assert later["verdict"]["cause"] == "output-buffered", _text(later)
    finally:
        _cancel(slurm, doc)


@pytest.mark.slow
def test_a_batch_job_with_u_that_prints_is_running_without_a_look_on_its_node(slurm, tmp_path):
    """The same work with -u: its output grows, it is running, and its node is not disturbed."""
    rc, doc, _ = _launch(tmp_path, f"{PY} -u {JOBS / 'works_buffered.py'}\n", watch="20")
    try:
        assert rc == 0 and doc["verdict"]["state"] == "running", _text(doc)
        assert not any(t["event"] == "stacks-sampled" for t in doc["timeline"]), doc["timeline"]
    finally:
        _cancel(slurm, doc)


@pytest.mark.slow
def test_a_batch_job_in_its_loop_is_running_before_its_settle_time(slurm, tmp_path):
    """Issue 20: the step line printed again and again shows the job past its start, read from its output
    file as the recorder reads a launch's output; the settle time (30 s here) is not waited out."""
    s = job_script(tmp_path, f"{PY} -u {JOBS / 'healthy.py'} 60\n")
    t0 = time.monotonic()
    rc, doc, err = dfd("launch", "--no-check", "--watch", "60", "--settle", "30", "--format", "text", "--",
                       "sbatch", "-o", "o-%j.log", str(s), cwd=tmp_path, env=_env())
    took = time.monotonic() - t0
    assert doc, err
    try:
        assert rc == 0 and doc["verdict"]["state"] == "running" and took < 25, (took, _text(doc))
        assert any('in its loop: "step # loss #" printed' in e for e in doc["verdict"]["evidence"]), _text(doc)
    finally:
        _cancel(slurm, doc)


def test_dfdoctors_own_look_is_never_the_users_failed_step():
    """A look that the job's end cut short (CANCELLED 0:15 in sacct, DerivedExitCode 0:15) is dfdoctor's own
    step, named job.OWN_STEP: not a step of the user's, so no `step-failed` for a job that completed."""
    from dfdoctor.slurm import job as slurm_job
    from dfdoctor.slurm.rules import Seen, judge

    f = slurm_job.JobFacts("171", state="COMPLETED", exit_code="0:0", derived="0:15", name="job.sbatch",
                           nodes="vm")
    rows = [{"JobID": "171", "JobName": "job.sbatch", "State": "COMPLETED", "ExitCode": "0:0"},
            {"JobID": "171.batch", "JobName": "batch", "State": "COMPLETED", "ExitCode": "0:0"},
            {"JobID": "171.0", "JobName": slurm_job.OWN_STEP, "State": "CANCELLED", "ExitCode": "0:15"}]
    slurm_job._merge_sacct(f, rows)
    assert [s.id for s in f.steps] == ["171.batch"] and f.derived == "0:0"
    assert judge(Seen(job=f)).state == "ok"
    # the user's own failed step still counts, with dfdoctor's beside it
    f = slurm_job.JobFacts("171", state="COMPLETED", exit_code="0:0", derived="1:0")
    slurm_job._merge_sacct(f, rows + [{"JobID": "171.1", "JobName": "python3", "State": "FAILED", "ExitCode": "1:0"}])
    assert [s.id for s in f.steps] == ["171.batch", "171.1"] and f.derived == "1:0"
    v = judge(Seen(job=f))
    assert v.cause == "step-failed" and "step 171.1 FAILED" in v.summary, v.summary


@pytest.mark.slow
@pytest.mark.parametrize("script", ["starts_then_dies.py 6", "quiet_then_one_line_then_dies.py"])
def test_a_batch_job_that_dies_after_a_misleading_start_is_never_called_running(slurm, tmp_path, script):
    """As for a launch here, each called running before: `starts_then_dies.py 6`, silent 6 s (CUDA coming up)
    then a table and shards, at 10 s of Slurm's RunTime, 1.5 s before it died (the settle time now counts from
    the first output); `quiet_then_one_line_then_dies.py`, busy and quiet for 12 s then one line, in the window
    of that line (output back after a silence must grow again). Both die on a missing data file."""
    rc, doc, _ = _launch(tmp_path, f"{PY} -u {JOBS / script}\n", watch="40")
    try:
        v, text = doc["verdict"], _text(doc)
        assert rc == 1 and v["state"] == "failed" and v["cause"] == "input-missing", text
    finally:
        _cancel(slurm, doc)


@pytest.mark.slow
def test_a_wait_seen_just_after_a_batch_job_wrote_explains_no_silence(slurm, tmp_path):
    """CI: the watch judged the output quiet; while `srun --overlap` looked at the node, the job printed and went
    to sleep, and "sleeping, not changed for 12 s" was said of a file that had just grown. A look during which
    the output grew proves no wait: the watch goes on and names the sleep from a look over a true silence."""
    flag = tmp_path / "wake"
    job = slurm.sbatch("-o", "o.log", str(job_script(tmp_path, f"{PY} -u {JOBS / 'wakes_on_flag.py'} {flag}\n")),
                       cwd=tmp_path, env=_env())
    out = tmp_path / "o.log"
    looks: list[float] = []

    def sampler(job_id, node, quiet_s):
        if not looks:  # the job writes after the watch measured its quiet, before its stacks are looked at
            flag.touch()
            assert wait_for(lambda: "woke" in out.read_text(), 20)
        looks.append(time.monotonic())
        return onnode.look(job_id, node, quiet_s)

    try:
        seen = slurm_watch.watch(job, {"stdout": str(out)}, 60.0, sampler=sampler, settle_s=10.0)
        finding = seen.node_look.finding if seen.node_look else None
        assert finding is not None and finding.cause == "sleeping", (seen.job.state, finding)
        assert len(looks) >= 2, "the look the output grew during was taken as the verdict"
    finally:
        slurm.cancel(job)
        slurm.wait_state(job, ("CANCELLED", "COMPLETED", "FAILED"))


@pytest.mark.slow
def test_a_lock_cycle_on_the_node_is_named_as_here(slurm, tmp_path):
    """The compile-lock cycle (stand-ins for torch's frames, tests/jobs/deadlock_fake/) read on the node as a look
    here reads it, from both of its samples: compile-deadlock (issue 34: it was `running`, exit 0, "no wait
    proven", with the cycle in the evidence)."""
    rc, doc, took = _launch(tmp_path, f"{PY} -u {JOBS / 'compile_deadlock.py'}\n")
    try:
        v, text = doc["verdict"], _text(doc)
        assert rc == 1 and (v["state"], v["cause"]) == ("failed", "compile-deadlock"), text
        assert v["summary"].startswith(f"Job {job_of(doc)} on {slurm.node}, its output file") and \
            v["summary"].endswith("2 threads are deadlocked in torch.compile: compile_lock held while waiting on "
                                  "the autograd engine"), v["summary"]
        assert any("thread drafter-0 holds compile_lock" in e for e in v["evidence"]), text
        assert "compile_guard" in v["fix"] and f"scancel {job_of(doc)}" in v["fix"], v["fix"]
        assert took < NAMED_WITHIN_S + 10, (took, text)
    finally:
        _cancel(slurm, doc)


@pytest.mark.slow
def test_a_quiet_batch_job_whose_look_fails_is_unknown_with_the_quiet_its_file_shows(slurm, tmp_path):
    """Running is earned (round 20): a batch job that clears its environment (`env -i`, as a container's
    --cleanenv does) cannot be found on its node (the agent finds a job's processes by SLURM_JOB_ID), and its
    output stays quiet. No progress seen and no fault found: `unknown`, exit 1, at the launch's end and in
    `status` (both said `running`, "its output file has not grown in 3 s", exit 0), with the quiet its file's
    mtime shows, not the watch's length. The environment is cleared by the script's #! line, before any shell of
    the job runs, so no look can catch a process that still has it."""
    script = tmp_path / "job.sbatch"
    script.write_text('#!/usr/bin/env -S -i /bin/sh -c "exec /bin/sleep 300"\n')
    rc, doc, err = dfd("launch", "--no-check", "--watch", "15", "--format", "text", "--", "sbatch", "-o",
                       "o-%j.log", str(script), cwd=tmp_path, env=_env())
    assert doc, err
    try:
        v, text = doc["verdict"], _text(doc)
        assert rc == 1 and (v["state"], v["cause"]) == ("unknown", None), (rc, text, doc["timeline"])
        # (a job Slurm started late, the cluster shared, is not looked at before the watch ends: unknown too)
        assert "no progress was seen" in v["summary"] and ("failed: no process of job" in v["summary"] or
                                                           "were not looked at" in v["summary"]), text
        job = job_of(doc)
        assert slurm.wait_state(job, ("RUNNING",), timeout=120) == "RUNNING", slurm.state(job)
        out = tmp_path / f"o-{job}.log"
        aged = time.time() - 100
        os.utime(out, (aged, aged))  # 100 s of quiet the file shows, whatever the watch's length
        rc, later, _ = dfd("status", f"slurm:{job}", "--watch", "3", cwd=tmp_path)
        v, text = later["verdict"], _text(later)
        assert rc == 1 and v["state"] == "unknown" and "has not grown in" not in v["summary"], text
        assert "failed: no process of job" in v["summary"], text  # its quiet is past the look's time: looked at
        quiet = re.search(r"has not changed for (\d+) s \(by its modification time\)", v["summary"])
        assert quiet and int(quiet[1]) >= 100, text
        assert f"tail -f {out}" in v["fix"] and f"dfdoctor status slurm:{job}" in v["fix"], text
    finally:
        _cancel(slurm, doc)
