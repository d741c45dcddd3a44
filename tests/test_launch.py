"""`dfdoctor launch` on real jobs: every cause a dead or silent job can show, and a healthy one called running."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import psutil
import pytest

from jobs.harness import dfdoctor, fill_up, job, job_env, kill_runs, launch, status, text_of

DEAD = [
    # (id, command, extra options, cause, what the evidence must name)
    ("crash", job("crash.py"), (), "crashed", ["FloatingPointError", "crash.py\", line 7"]),
    ("missing-module", job("missing_module.py"), (), "missing-module", ["dfdoctor_no_such_module_xyz",
                                                                      "missing_module.py, line 4"]),
    ("syntax-error", job("syntax_error.py"), (), "syntax-error", ["syntax_error.py, line 2", "SyntaxError"]),
    ("import-error", job("import_error.py"), (), "import-error", ["badlib.py, line 3", "KeyError: 'batch_size'"]),
    ("exited-early", job("exited_early.py"), (), "exited-early", ["status 0"]),
    ("killed-by-signal", job("self_kill.py"), (), "killed-by-signal", ["SIGKILL"]),
    ("segfault", job("segfault.py"), (), "crashed", ["SIGSEGV"]),
    ("oom-killed", job("oom.py"), ("--memory-limit", "128M"), "oom-killed",
     ["oom_kill counter", "0 before, 1 after", "Killed process"]),
    ("no-such-command", ["dfdoctor-no-such-command-xyz", "--lr", "1"], (), "command-not-found",
     ["dfdoctor-no-such-command-xyz", "ENOENT"]),
    ("no-such-script", [job("crash.py")[0], "no_such_train.py"], (), "command-not-found", ["no_such_train.py"]),
    ("not-executable", [str(Path(job("crash.py")[1]))], (), "command-not-found", ["EACCES"]),
]


@pytest.fixture
def work(tmp_path: Path):
    """A scratch project folder; whatever a run left alive in it is killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.parametrize("name,command,extra,cause,culprits", DEAD, ids=[d[0] for d in DEAD])
def test_dead_job_gets_its_cause(work, name, command, extra, cause, culprits):
    t0 = time.monotonic()
    proc, rep = launch(work, *command, extra=extra, watch=20)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert rep["verdict"]["state"] == "failed"
    assert rep["verdict"]["cause"] == cause, text_of(rep)
    for c in culprits:
        assert c in text_of(rep), f"{c!r} not in evidence:\n{text_of(rep)}"
    assert rep["verdict"]["fix"]
    assert time.monotonic() - t0 < 15, "a dead job must not wait for the end of the watch"
    assert f"[{cause}]" in proc.stdout


def test_exit_status_and_signal_in_run(work):
    _, rep = launch(work, *job("self_kill.py"))
    assert rep["run"]["signal"] == "SIGKILL" and rep["run"]["exit_code"] is None
    _, rep = launch(work, *job("crash.py"))
    assert rep["run"]["exit_code"] == 1 and rep["run"]["signal"] is None
    assert Path(rep["run"]["dir"], "report.json").exists()
    events = [e["event"] for e in rep["timeline"]]
    assert events.index("spawned") < events.index("exit") < events.index("verdict")


def test_log_dir_missing_never_starts_the_job(work):
    proc, rep = launch(work, *job("healthy.py", "5"), log=str(work / "no" / "such" / "train.log"))
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "log-dir-missing"
    assert str(work / "no" / "such") in text_of(rep)
    assert rep["run"]["pid"] is None, "like `> LOG`, a log that cannot be opened means the job never starts"


def test_log_not_writable(work):
    (work / "train.log").mkdir()  # a folder where the log should be
    proc, rep = launch(work, *job("healthy.py", "5"))
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "log-not-writable"
    assert "EISDIR" in text_of(rep)


def test_pre_launch_check_blocks_then_force(work):
    log = str(work / "missing" / "train.log")
    proc, rep = launch(work, *job("healthy.py", "5"), log=log, check=True, extra=("--only", "log.writable"))
    assert proc.returncode == 1 and rep["verdict"]["cause"] == "log-dir-missing"
    assert "Not launched" in rep["verdict"]["summary"]
    assert not (work / ".dfdoctor").exists(), "a blocked launch starts nothing"
    proc, rep = launch(work, *job("healthy.py", "5"), log=log, check=True,
                       extra=("--only", "log.writable", "--force"))
    assert rep["verdict"]["cause"] == "log-dir-missing" and rep["run"]["dir"], "--force launched it anyway"


def test_a_broken_shell_command_is_reported_but_never_blocks_the_launch_that_replaces_it(work):
    """--shell-command names the line the user types; launch starts the command under the recorder instead.
    Round 5 left it blocked by the rehearsal of that line. What the line does wrong is said; the job runs."""
    line = f"nohup {job('healthy.py', '30')[0]} healthy.py > {work}/missing/train.log 2>&1 &"
    proc, rep = launch(work, *job("healthy.py", "30"), watch=20, check=True,
                       extra=("--only", "launch.path", "--only", "log.writable", "--shell-command", line))
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "running", text_of(rep)
    said = [e for e in v["evidence"] if e.startswith("your line (--shell-command, not run by this launch)")]
    assert len(said) == 1 and "[log-dir-missing]" in said[0] and f"{work}/missing" in said[0], text_of(rep)
    assert any(c["id"] == "launch.path" and c["status"] == "fail" for c in rep["checks"]), rep["checks"]
    assert not (work / "missing").exists()


def test_healthy_job_is_running_and_log_is_appended(work):
    (work / "train.log").write_text("line from an earlier run\n")
    t0 = time.monotonic()
    proc, rep = launch(work, *job("healthy.py", "30"), watch=30)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rep["verdict"]["state"] == "running" and rep["verdict"]["cause"] is None
    assert took < 15, f"a healthy job is called running as soon as its log grows steadily, not after {took:.0f} s"
    assert rep["run"]["pid"] and rep["run"]["id"] in proc.stdout
    text = (work / "train.log").read_text()
    assert text.startswith("line from an earlier run\nstep 0 loss"), "an existing log is only appended to"
    os.kill(rep["run"]["pid"], 0)  # still alive after dfdoctor exited


def test_import_hang_with_stacks(work):
    proc, rep = launch(work, *job("import_hang.py"), watch=3)
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "import-hang"
    assert "hanglib.py" in text_of(rep) and "MainThread" in text_of(rep), "the stacks name where it waits"


def test_output_buffered(work):
    proc, rep = launch(work, *job("buffered.py"), watch=3)
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "output-buffered", text_of(rep)
    assert "PYTHONUNBUFFERED" in rep["verdict"]["fix"]


def test_unbuffered_is_not_called_buffered(work):
    proc, rep = launch(work, *job("buffered.py"), watch=10, env=job_env(PYTHONUNBUFFERED="1"))
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)


def test_quiet_job_unbuffered_after_an_option_with_a_value_is_not_called_buffered(work):
    """-u after `-W ignore` (a value given apart) is still -u: the look at the live job walks options as Python
    does, so a job that has not printed yet is not blamed on buffering."""
    py, script = job("buffered.py", "quiet")[:2]
    proc, rep = launch(work, py, "-W", "ignore", "-X", "dev", "-u", script, "quiet", watch=5)
    assert rep["verdict"]["cause"] != "output-buffered", text_of(rep)
    # it sleeps before its first print: named as such since issue 23 (it was "written nothing", import-hang)
    assert rep["verdict"]["cause"] == "sleeping" and "buffered.py:7" in rep["verdict"]["summary"], text_of(rep)


def test_log_elsewhere_logging_file_handler(work):
    other = work / "logs-elsewhere.log"
    proc, rep = launch(work, *job("own_log.py", str(other)), watch=3)
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "log-elsewhere"
    assert str(other) in rep["verdict"]["summary"]


def test_own_file_handler_without_log_is_running(work):
    """Round 14 trial: a job that logs through its own FileHandler (`basicConfig(filename='train.log')`), printing
    nothing, launched without --log was `failed` `log-elsewhere` (exit 1) while its log grew: that file is its log."""
    proc, rep = launch(work, *job("own_log.py", "train.log"), watch=4, log=None)
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)
    assert rep["verdict"]["cause"] is None, text_of(rep)
    assert "its own log train.log grows" in rep["verdict"]["summary"], text_of(rep)
    assert f"tail -f {work / 'train.log'}" in rep["verdict"]["fix"]


@pytest.mark.parametrize("wait", ["sleep", "busy"])
def test_own_file_handler_slower_than_the_look_without_log_is_never_failed(work, wait):
    """A job that logs to its own file every 30 s, less often than the look lasts, launched without --log: no file
    was expected, so the one it writes is no fault (busy between its lines, it was `failed` `log-elsewhere`, exit 1,
    from the look that saw the file open but not growing); its progress is said as established or not, never as
    a failure."""
    proc, rep = launch(work, *job("own_log.py", "train.log", "1000", wait, "30"), watch=3, log=None)
    v = rep["verdict"]
    assert v["state"] != "failed" and v["cause"] != "log-elsewhere", text_of(rep)
    assert v["state"] == "running" or "not established" in v["summary"], text_of(rep)


@pytest.mark.slow
@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "unbuffered"])
def test_busy_job_growing_its_own_log_is_running_without_waiting_out_the_watch(work, unbuffered):
    """A job computing between its lines: without -u it was `output-buffered` (failed: "its log is still empty"),
    with -u it ran out the whole watch (60 s by default, no wait for the stacks to prove) and was then
    `log-elsewhere`. A look that sees its own log grow ends the watch, once past the settle time: running."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("own_log.py", "train.log", "1000", "busy"), watch=60, log=None,
                       env=job_env(PYTHONUNBUFFERED=unbuffered) if unbuffered else None)
    assert proc.returncode == 0 and "its own log train.log grows" in rep["verdict"]["summary"], text_of(rep)
    assert time.monotonic() - t0 < 40, "the watch waited to its end for a job whose own log grew"


@pytest.mark.parametrize("where", ["wandb/run-1/logs", "session_2026-12-06_14-36-02_676951_6769/logs"],
                         ids=["wandb", "ray-session"])
def test_a_tools_log_growing_is_not_the_jobs_own_log(work, where):
    """A log a helper process keeps under wandb/ (its heartbeat), or under a Ray session's folder (a driver's
    private Ray instance: its GCS and raylet log from ray.init() on, before Ray's line saying which cluster the
    driver joined, which a loaded machine delayed past the look), grows while the job waits forever: not progress."""
    proc, rep = launch(work, *job("tool_log.py", str(work), where), watch=15, log=None)
    assert "its own log" not in rep["verdict"]["summary"], text_of(rep)


def test_own_file_handler_without_log_that_ends_is_ok(work):
    """The same job ending by itself with status 0 (25 steps, 5 s) ran to completion: it wrote its own log."""
    proc, rep = launch(work, *job("own_log.py", "train.log", "25"), watch=30, log=None)
    assert proc.returncode == 0 and rep["verdict"]["state"] == "ok", text_of(rep)
    assert "it wrote its own log train.log" in rep["verdict"]["summary"], text_of(rep)


def test_own_file_handler_beside_an_empty_log_is_log_elsewhere_not_silent(work):
    """With --log the same job, looked at between two lines, was `sleeping` ("silent: nothing written", exit 0)
    while --log stayed empty and its own file grew: the growth seen names where it writes."""
    proc, rep = launch(work, *job("own_log.py", str(work / "own.log")), watch=6)
    assert proc.returncode == 1 and rep["verdict"]["cause"] == "log-elsewhere", text_of(rep)
    assert "stays empty" in text_of(rep) and str(work / "own.log") in rep["verdict"]["summary"], text_of(rep)


def test_log_elsewhere_exec_redirect(work):
    other = work / "other.log"
    cmd = f"exec > {other} 2>&1; exec {job('healthy.py')[0]} -u {job('healthy.py')[1]} 20"
    proc, rep = launch(work, "sh", "-c", cmd, watch=3)
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "log-elsewhere"
    assert f"fd 1 -> {other}" in text_of(rep)


def test_no_redirect_job_writes_its_own_log(work):
    log = work / "train.log"
    proc, rep = launch(work, *job("own_log.py", str(log)), watch=10, extra=("--no-redirect",))
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)
    assert "step" in log.read_text()


@pytest.mark.slow
def test_fx_trace_race_real_torch_compile(work):
    proc, rep = launch(work, *job("fx_race.py"), watch=240)
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "fx-trace-race", text_of(rep)
    assert "symbolically trace" in text_of(rep) or "CURRENT_PATCHER" in text_of(rep)


def test_post_checks_report_leftovers_and_resources(work):
    proc, rep = launch(work, "sh", "-c", "sleep 30 & echo started; exit 0")
    assert rep["verdict"]["state"] == "ok", text_of(rep)
    checks = {c["id"]: c for c in rep["checks"]}
    left = checks["job.leftovers"]
    assert left["status"] == "warn" and any("sleep 30" in e for e in left["evidence"]), left
    assert checks["job.resources"]["status"] == "ok" and "peak" in checks["job.resources"]["summary"]
    # the fix it gives ends the leftover (it carries the run's marker), and the job's own verdict stays
    assert f"`dfdoctor stop {rep['run']['id']}`" in left["fix"] and "kill" not in left["fix"], left["fix"]
    stray = left["data"]["leftovers"]
    p = dfdoctor("stop", "--cwd", str(work), rep["run"]["id"], cwd=work)
    assert p.returncode == 0 and f"stopped pid {stray[0]} (SIGTERM): sleep 30" in p.stdout, p.stdout
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in stray)
    assert status(work)[1]["verdict"]["state"] == "ok"  # it had ended by itself: not `stopped-by-user`


def test_compile_deadlock_while_another_thread_still_prints_is_never_running(work):
    """On the H200 the unguarded trainer was called running at 39 s: three drafters still printed while the
    lock cycle held. Before "running" is said, the stacks of every process are looked at once."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("compile_deadlock_while_printing.py"), watch=60)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == "compile-deadlock", text_of(rep)
    assert "thread drafter-0 holds compile_lock" in "\n".join(v["evidence"]), text_of(rep)
    assert time.monotonic() - t0 < 30


def test_compile_deadlock_from_the_stacks_of_a_silent_job(work):
    """The GPU-only lock cycle, re-enacted on the CPU with stand-ins named like torch's frames (see
    tests/jobs/deadlock_fake/): launch hands py-spy's stacks to dfdoctor.diagnose.stackclass. Two samples some
    seconds apart that show the same cycle end the watch at once; `status` later says since when it is stuck."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("compile_deadlock.py"), watch=120)
    took = time.monotonic() - t0
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "compile-deadlock", text_of(rep)
    assert rep["verdict"]["summary"] == ("2 threads are deadlocked in torch.compile: compile_lock held while "
                                         "waiting on the autograd engine."), rep["verdict"]["summary"]
    evidence = "\n".join(rep["verdict"]["evidence"])
    assert "thread drafter-0 holds compile_lock" in evidence and "waits for compile_lock" in evidence
    assert took < 40, f"named after {took:.0f} s: it must not wait out the 120 s watch"
    from dfdoctor.model import Report
    from dfdoctor.render import html as html_render

    page = html_render.render(Report.from_dict(rep))  # the HTML headline is the one sentence, threads below it
    head = re.search(r'<h1 id="verdict-summary">(.*?)</h1>', page, re.S).group(1)
    assert head.startswith("2 threads are deadlocked in torch.compile") and "\n" not in head.strip()
    assert page.index("thread drafter-0 holds compile_lock") > page.index('id="verdict-evidence"')
    time.sleep(2)
    _, st = status(work)
    assert st["verdict"]["cause"] == "compile-deadlock", text_of(st)
    since = next(e for e in st["verdict"]["evidence"] if e.startswith("stuck since"))
    assert int(re.search(r"at least (\d+) s", since).group(1)) >= 2, since
    assert "bundled trainer" not in st["verdict"]["fix"] and "compile_guard" in st["verdict"]["fix"]


def test_without_log_the_output_stays_in_the_run_folder(work):
    proc, rep = launch(work, *job("healthy.py", "20"), log=None, watch=10)
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)
    assert "step 0" in (Path(rep["run"]["dir"]) / "stdout.log").read_text()


@pytest.mark.parametrize("args,message", [
    ([], "Missing argument"),
    (["--memory-limit", "lots", "--", "true"], "not a size"),
    (["--watch", "-1", "--", "true"], "--watch"),
])
def test_bad_usage_is_exit_2(work, args, message):
    from jobs.harness import dfdoctor

    proc = dfdoctor("launch", "--no-check", "--cwd", str(work), *args, cwd=work)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (work / ".dfdoctor").exists()


def test_run_dir_holding_a_run_is_refused(work):
    from jobs.harness import dfdoctor

    run_dir = work / "myrun"
    launch(work, *job("exited_early.py"), extra=("--run-dir", str(run_dir)))
    before = (run_dir / "record.jsonl").read_bytes()
    proc = dfdoctor("launch", "--no-check", "--cwd", str(work), "--run-dir", str(run_dir), "--", "true", cwd=work)
    assert proc.returncode == 2 and "already holds a run" in proc.stderr
    assert (run_dir / "record.jsonl").read_bytes() == before, "an existing run is never overwritten"


@pytest.fixture
def full_fs(tmp_path: Path):
    """A real, tiny tmpfs filled to the last byte."""
    import subprocess

    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        fill_up(mnt / "filler")
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_disk_full_while_the_job_runs(work, full_fs):
    proc, rep = launch(work, *job("healthy.py", "20"), log=str(full_fs / "train.log"), watch=10)
    assert proc.returncode == 1
    assert rep["verdict"]["cause"] == "disk-full", text_of(rep)
    assert "ENOSPC" in text_of(rep)


def test_broken_plugin_is_reported_by_launch_and_status(work):
    """A plugin that cannot load is an `error` record in every report, once, as `check` reports it."""
    from conftest import broken_plugin_site

    env = dict(job_env(), PYTHONPATH=str(broken_plugin_site(work / "site")))

    def broken_records(rep: dict) -> list[dict]:
        return [c for c in rep["checks"] if c["id"] == "plugin.broken.import"]

    for extra, check in (((), False), (("--only", "log.writable"), True)):
        _, rep = launch(work, *job("exited_early.py"), check=check, extra=extra, env=env)
        found = broken_records(rep)
        assert len(found) == 1 and found[0]["status"] == "error", rep["checks"]
        assert "no_such_module_xyz" in found[0]["summary"]
    from jobs.harness import dfdoctor

    out = work / "status.json"
    proc = dfdoctor("status", "--cwd", str(work), "--format", "json", "--output", str(out), cwd=work, env=env)
    assert out.exists(), proc.stderr
    assert len(broken_records(json.loads(out.read_text()))) == 1


def test_leftovers_never_name_a_recycled_pid_or_a_zombie():
    """The recorder writes each leftover's start time; a pid now used by another process, or a zombie, is not
    reported (the fix would tell the user to kill it)."""
    from dfdoctor.agent.procfs import proc_start_time
    from dfdoctor.checks.probes.leftovers_probe import still_running
    from support.processes import live_and_zombie

    with live_and_zombie() as (live, zombie):
        start = proc_start_time(live.pid)
        found = still_running({str(live.pid): start, str(zombie.pid): proc_start_time(zombie.pid)})
        assert [f["pid"] for f in found] == [live.pid] and "time.sleep(30)" in found[0]["cmdline"]
        assert still_running({str(live.pid): start + 1}) == [], "same pid, another start time: another process"
        assert [f["pid"] for f in still_running({str(live.pid): None})] == [live.pid]  # an older record: pid only


def test_a_job_handed_off_to_a_daemon_is_relayed_not_killed(work):
    """A launcher that double-forks its trainer and exits 0: the trainer keeps the launcher's pipes. dfdoctor
    must keep relaying (closing them would kill it with EPIPE at its next print), call it running, and judge
    the trainer's own end later."""
    from jobs.harness import status

    # the daemon runs until the test stops it, so a slow (loaded) launch cannot outlast it
    proc, rep = launch(work, *job("handoff.py", "60", "0", str(work / "stop")), watch=10)
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)
    assert "handed its work to pid" in rep["verdict"]["summary"] and "handoff.py" in rep["verdict"]["summary"]
    (work / "stop").touch()
    _wait_gone(int(re.search(r"pid (\d+)", rep["verdict"]["summary"]).group(1)))
    log = (work / "train.log").read_text()
    # its last line comes after dfdoctor has exited: still relayed, not cut off by a closed pipe
    assert "daemon finished after" in log, "the daemon was cut off: " + log[-200:]
    proc, st = status(work)
    assert proc.returncode == 0 and st["verdict"]["state"] == "ok", text_of(st)
    assert "ran to completion" in st["verdict"]["summary"]


def test_a_hand_off_through_short_lived_processes_is_found(work):
    """The hand-off is still moving when the launcher exits (each process forks the next and exits at once):
    the recorder keeps looking while the pipes stay open, and finds the daemon at the end of the chain."""
    proc, rep = launch(work, *job("handoff_relay.py", str(work / "stop")), watch=10)
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)
    assert "handed its work to pid" in rep["verdict"]["summary"], text_of(rep)
    (work / "stop").touch()
    _wait_gone(int(re.search(r"pid (\d+)", rep["verdict"]["summary"]).group(1)))


def test_a_handed_off_daemon_that_crashes_is_named(work):
    from jobs.harness import status

    # as above: the daemon runs until the test stops it, so the watch can be long enough for a loaded machine
    _, rep = launch(work, *job("handoff.py", "60", "3", str(work / "stop")), watch=10)
    assert "handed its work to pid" in rep["verdict"]["summary"], text_of(rep)
    (work / "stop").touch()
    _wait_gone(int(re.search(r"pid (\d+)", rep["verdict"]["summary"]).group(1)))
    proc, st = status(work)
    assert proc.returncode == 1 and st["verdict"]["cause"] == "crashed", text_of(st)
    assert "the daemon gave up with status 3" in text_of(st)


LAUNCHER = "#!/bin/sh\n{echo}nohup {py} -u {job} 3 {redirect} {log} 2>&1 &\n"


def _wait_gone(pid: int, limit: float = 20) -> None:
    """Wait until a process the test started has ended (zombies count as ended), then a moment for the recorder
    to write its end."""
    deadline = time.monotonic() + limit
    while _is_live(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)


def _is_live(pid: int) -> bool:
    """Whether pid runs (a zombie waiting for init to reap it does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.parametrize("echo,redirect,target", [
    ("", ">", "x.log"),             # silent launcher, trainer writes another file
    ("echo launched\n", ">", "x.log"),  # a launcher that says something first
    ("", ">>", "train.log"),        # the trainer appends to the expected log itself
], ids=["silent-elsewhere", "chatty-elsewhere", "writes-the-log"])
def test_a_launcher_that_backgrounds_its_trainer_with_a_redirect(work, echo, redirect, target):
    """`nohup python train.py > x.log 2>&1 &` in a launcher: the launcher's exit 0 is not the job's end (it was
    called 'ran to completion' or 'exited-early'); the process left writing is the job: running while it runs
    (issue 23: it was FAILED [log-elsewhere], exit 1, while training ran), its own log named."""
    from jobs.harness import PY, status

    (work / "launch.sh").write_text(LAUNCHER.format(echo=echo, py=PY, job=job("healthy.py")[1],
                                                    redirect=redirect, log=work / target))
    (work / "launch.sh").chmod(0o755)
    proc, rep = launch(work, str(work / "launch.sh"), watch=5, extra=("--settle", "1"))
    assert proc.returncode == 0 and rep["verdict"]["state"] == "running", text_of(rep)
    assert "healthy.py" in rep["verdict"]["summary"] and str(work / target) in rep["verdict"]["summary"]
    left = {c["id"]: c for c in rep["checks"]}["job.leftovers"]
    assert left["status"] == "ok" and "work goes on in pid" in left["summary"], left  # never "kill" the trainer
    _wait_gone(int(re.search(r"pid (\d+)", rep["verdict"]["summary"]).group(1)))  # it ends after 3 s
    _, st = status(work)
    assert st["verdict"]["state"] == "unknown" and "has ended" in st["verdict"]["summary"], text_of(st)
