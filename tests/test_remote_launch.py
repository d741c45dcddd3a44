"""`dfdoctor launch --target` and `status` for a remote run, on the real chain: sshd on 127.0.0.1 -> the `pct`
shim -> lxc-attach -> busybox container 200 (tests/infra). The job, its log and its run folder are in the
container; dfdoctor keeps a copy of the record here; every job started here is killed by the fixture."""

from __future__ import annotations

import json
import shlex
import time
import uuid
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes

from dfdoctor.run import record
from infra.fixtures import Infra, folder_in_container, growing, infra, procs_naming  # noqa: F401

pytestmark = pytest.mark.slow

HEALTHY = "import time\nfor i in range({n}):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"
# Runs until the test drops a `stop` file beside it (at most a minute): its end is the test's choice, not a race
# with how long the pre-launch checks take on a loaded machine.
UNTIL_STOPPED = ("import os, time\nhere = os.path.dirname(os.path.abspath(__file__))\nfor i in range(600):\n"
                 "    print('step', i, flush=True)\n    if os.path.exists(os.path.join(here, 'stop')):\n"
                 "        break\n    time.sleep(0.1)\nprint('done', flush=True)\n")
MISSING = "import json\nimport no_such_module_dfd\nprint('never')\n"


@pytest.fixture
def remote(infra: Infra, tmp_path: Path):
    """A work folder inside container 200 (with a hostile name), a local folder for dfdoctor, a private cache;
    every job cleaned up after."""
    with folder_in_container(infra, tmp_path, "dfd rl $(x);'") as f:
        yield f.inside, f.host_side, f.local, f.env


def _launch(dfdoctor, infra: Infra, local: Path, env: dict, *args: str) -> tuple[int, dict]:
    """`dfdoctor launch --target pct://... --format json ARGS`, from the local folder."""
    p = dfdoctor("launch", "--target", infra.pct_target, "--format", "json", "--skip", "persistence.session",
                 *args, cwd=local, env=env, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def _status(dfdoctor, local: Path, env: dict, *args: str) -> tuple[int, dict]:
    """`dfdoctor status --format json ARGS` from the local folder."""
    p = dfdoctor("status", "--format", "json", *args, cwd=local, env=env, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def test_healthy_job_runs_in_the_container_and_outlives_dfdoctor(infra, remote, dfdoctor):
    inside, host_side, local, env = remote
    (host_side / "train.py").write_text(UNTIL_STOPPED)
    rc, rep = _launch(dfdoctor, infra, local, env, "--cwd", inside, "--log", f"{inside}/train.log",
                      "--", "python3", f"{inside}/train.py")
    assert rc == 0 and rep["verdict"]["state"] == "running", rep["verdict"]
    assert [c for c in rep["checks"] if c["id"] == "imports.smoke"][0]["status"] == "ok"  # pre-checks ran there
    assert f"pct exec {infra.vmid} -- sh -c" in rep["verdict"]["fix"] and "tail -f" in rep["verdict"]["fix"]
    # dfdoctor and every ssh session it opened are gone; the job still runs and logs IN THE CONTAINER
    assert procs_naming(f"{inside}/train.py") and procs_naming(f"{inside}/.dfdoctor/runs")
    assert growing(host_side / "train.log") and "step" in (host_side / "train.log").read_text()
    assert not Path(inside, "train.log").exists()  # nothing of it landed on this machine's own /tmp
    run = rep["run"]
    assert run["target"] == infra.pct_target and run["remote_dir"] == f"{inside}/.dfdoctor/runs/{run['id']}"
    assert run["strategy"] == "dfdoctor"  # nothing remembered for this target: the recorder's own detach
    there = host_side / ".dfdoctor" / "runs" / run["id"]
    assert (there / "record.jsonl").exists() and (there / "heartbeat").exists()
    copy = Path(run["dir"])
    assert copy.parent == local / ".dfdoctor" / "runs" and (copy / "report.json").exists()
    assert record.load(copy).spawned["cwd"] == inside  # the recorder's own record, copied here
    # later, from a fresh dfdoctor: still running; after its end: ended, with its status
    rc, st = _status(dfdoctor, local, env)
    assert rc == 0 and st["verdict"]["state"] == "running" and st["run"]["id"] == run["id"], st["verdict"]
    (host_side / "stop").touch()
    deadline = time.monotonic() + 20
    while procs_naming(f"{inside}/.dfdoctor") and time.monotonic() < deadline:
        time.sleep(0.3)
    rc, st = _status(dfdoctor, local, env, run["id"])
    assert rc == 0 and st["verdict"]["state"] == "ok" and st["run"]["exit_code"] == 0, st["verdict"]
    assert st["run"]["finished"] and "done" in (copy / "stdout.log").read_text()


def test_missing_module_in_the_container_is_named(infra, remote, dfdoctor):
    inside, host_side, local, env = remote
    (host_side / "train.py").write_text(MISSING)
    # a training interpreter that cannot even run the recorder: the target's python3 records instead
    (host_side / "badpy").write_text("#!/bin/sh\necho 'this interpreter is broken' >&2\nexit 1\n")
    (host_side / "badpy").chmod(0o755)
    began = time.monotonic()
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--cwd", inside, "--log", f"{inside}/train.log",
                      "--python", f"{inside}/badpy", "--", "python3", "train.py")
    assert rc == 1 and rep["verdict"]["cause"] == causes.MISSING_MODULE, rep["verdict"]
    launched = [e for e in record.load(Path(rep["run"]["dir"])).launcher if e["event"] == "launched"][0]
    assert "this interpreter is broken" in launched["recorder_fallback"]
    assert time.monotonic() - began < 20
    evidence = "\n".join(rep["verdict"]["evidence"])
    assert "no_such_module_dfd" in evidence and f"{inside}/train.py" in evidence and "line 2" in rep["verdict"]["summary"]
    assert "ModuleNotFoundError" in (host_side / "train.log").read_text()  # its log, in the container
    rc, st = _status(dfdoctor, local, env)
    assert rc == 1 and st["verdict"]["cause"] == causes.MISSING_MODULE and st["run"]["exit_code"] == 1
    # with the pre-checks on, the same job is not even started: imports.smoke finds it there
    rc, rep = _launch(dfdoctor, infra, local, env, "--cwd", inside, "--", "python3", "train.py")
    assert rc == 1 and rep["verdict"]["cause"] == causes.MISSING_MODULE and rep["run"]["dir"] is None
    assert rep["verdict"]["summary"].startswith("Not launched")
    # run folders are pruned by count on both sides, the ended ones only
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--keep-runs", "1", "--cwd", inside, "--",
                      "python3", "train.py")
    assert rc == 1 and rep["verdict"]["cause"] == causes.MISSING_MODULE
    assert [p.name for p in (host_side / ".dfdoctor" / "runs").iterdir()] == [rep["run"]["id"]]
    assert [p.name for p in (local / ".dfdoctor" / "runs").iterdir()] == [rep["run"]["id"]]


def _cwd(p) -> str:
    """A process's folder (a container's process: as the container sees it); "" when it is gone."""
    try:
        return p.cwd()
    except psutil.Error:
        return ""


def test_killed_job_is_reported_ended_and_strategy_is_remembered(infra, remote, dfdoctor):
    inside, host_side, local, env = remote
    (host_side / "train.py").write_text(HEALTHY.format(n=600))
    cache = Path(env["XDG_CACHE_HOME"]) / "dfdoctor"
    cache.mkdir(parents=True)
    # as if persistence.session had found tmux best for this target: auto uses it
    (cache / "strategies.json").write_text(json.dumps({infra.pct_target: {"strategy": "tmux", "matrix": []}}))
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--cwd", inside, "--log", f"{inside}/t.log",
                      "--", "python3", "train.py")
    assert rc == 0 and rep["verdict"]["state"] == "running" and rep["run"]["strategy"] == "tmux", rep["verdict"]
    jobs = [p for p in procs_naming("train.py") if "agent.pyz" not in " ".join(p.info["cmdline"] or []) and _cwd(p) == inside]
    assert jobs
    from jobs.harness import wait_for

    in_container = host_side / ".dfdoctor" / "runs" / rep["run"]["id"]
    assert record.load(in_container).exit is None
    for p in jobs:
        p.kill()  # SIGKILL from outside: the recorder sees it and records the signal
    assert wait_for(lambda: record.load(in_container).exit is not None, timeout=20), "the recorder wrote no exit"
    rc, st = _status(dfdoctor, local, env)
    assert rc == 1 and st["verdict"]["cause"] == causes.KILLED_BY_SIGNAL and st["run"]["signal"] == "SIGKILL"


def test_silent_jobs_in_the_container_waiting_or_busy(infra, remote, dfdoctor):
    inside, host_side, local, env = remote
    (host_side / "wait.py").write_text("import time\ntime.sleep(60)\n")
    (host_side / "busy.py").write_text("print('starting')\nwhile True:\n    sum(range(1000))\n")  # in its buffer
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--watch", "3", "--cwd", inside, "--",
                      "python3", f"{inside}/wait.py")
    # asleep and nothing shows it broken (issue 34; it was import-hang with no import in sight): the kernel's view
    v = rep["verdict"]
    assert rc == 0 and (v["state"], v["cause"]) == ("running", causes.SLEEPING), v
    assert "asleep in clock_nanosleep" in v["summary"] and "stack could not be read" in v["summary"], v
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--watch", "3", "--cwd", inside, "--",
                      "python3", f"{inside}/busy.py")
    assert rc == 1 and rep["verdict"]["cause"] == causes.OUTPUT_BUFFERED, rep["verdict"]


def test_a_session_that_kills_everything_takes_the_recorder_with_it(infra, tmp_path, dfdoctor):
    """The kill-everything key: each session runs in a PID namespace that dies with it. The recorder detaches,
    says its pid, and is killed as the starting session ends: that is named, not 'dfdoctor's bug'."""
    work = tmp_path / f"kill all {uuid.uuid4().hex[:6]}"
    work.mkdir()
    (work / "train.py").write_text(HEALTHY.format(n=100))
    env = dict(infra.env(), XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        p = dfdoctor("launch", "--no-check", "--target", "ssh://dfdoctor-killall", "--cwd", str(work), "--log",
                     str(work / "train.log"), "--format", "json", "--", "python3", "train.py", cwd=tmp_path, env=env)
        assert p.returncode == 1, p.stderr
        rep = json.loads(p.stdout)
        assert rep["verdict"]["cause"] == causes.KILLED_ON_SESSION_EXIT, rep["verdict"]
        assert "persistence.session" in rep["verdict"]["fix"]
    finally:
        for proc in procs_naming(str(work)):
            proc.kill()


def test_leftovers_are_looked_up_in_the_container(infra, remote, dfdoctor):
    """job.leftovers runs where the job ran: a stray worker still alive in the container is named there, and
    once it is gone `status` says so."""
    inside, host_side, local, env = remote
    (host_side / "stray.py").write_text("import time\ntime.sleep(60)\n")
    (host_side / "leave.py").write_text(f"import subprocess\nsubprocess.Popen(['python3', {inside + '/stray.py'!r}])\n"
                                        "print('left a worker behind', flush=True)\n")
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--watch", "3", "--cwd", inside, "--",
                      "python3", f"{inside}/leave.py")
    left = {c["id"]: c for c in rep["checks"]}["job.leftovers"]
    assert left["status"] == "warn" and infra.pct_target in left["summary"], left
    assert any("stray.py" in e for e in left["evidence"]), left
    strays = procs_naming(f"{inside}/stray.py")
    assert strays and all(p.pid not in left["data"]["leftovers"] for p in strays), \
        "the pids named are the container's own, not this machine's"
    for p in strays:
        p.kill()
    psutil.wait_procs(strays, timeout=5)
    rc, st = _status(dfdoctor, local, env)
    left = {c["id"]: c for c in st["checks"]}["job.leftovers"]
    assert left["status"] == "ok" and "none runs now" in left["summary"], left


def test_a_memory_limit_that_cannot_be_set_there_is_said(infra, remote, dfdoctor):
    """The test container has no memory cgroup: `--memory-limit` cannot be applied there, and the report says
    so instead of letting the user believe the job is capped."""
    inside, host_side, local, env = remote
    (host_side / "train.py").write_text(HEALTHY.format(n=5))
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--memory-limit", "64M", "--watch", "5", "--cwd",
                      inside, "--", "python3", "train.py")
    res = {c["id"]: c for c in rep["checks"]}["job.resources"]
    assert res["status"] == "warn" and "--memory-limit was NOT applied" in res["summary"], res
    assert "no memory cgroup is mounted" in res["summary"]
    assert any(e["event"] == "memory-limit-failed" and "NOT applied" in e["detail"] for e in rep["timeline"])


def test_secrets_are_masked_in_the_run_folder_there_and_here(infra, remote, dfdoctor):
    """The recorder shipped into the container masks by dfdoctor's own rules (embedded in the copy it ships):
    `--hf-token VALUE`, GH_PAT=ghp_... and a DSN's password never land in the run folder there, nor in the copy
    here, even when the job prints them; the unmasked spec it read (spec.in) is gone."""
    inside, host_side, local, env = remote
    hf, pat, pw = "hfcli-remote-9f8e7d6c5b4a3928", "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2", "Rem0te-DB-passw0rd"
    (host_side / "show.py").write_text("import sys\nprint('config', ' '.join(sys.argv[1:]), flush=True)\n")
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--watch", "5", "--cwd", inside, "--",
                      "python3", f"{inside}/show.py", "--hf-token", hf, f"GH_PAT={pat}",
                      f"postgres://trainer:{pw}@db/x")
    assert rep["verdict"]["state"] == "ok", rep["verdict"]
    there = next(host_side.rglob("record.jsonl")).parent
    assert not (there / "spec.in").exists()
    files = [p for p in list(there.iterdir()) + list(local.rglob("*")) if p.is_file()]
    assert any(p.name == "stdout.log" for p in files)
    for p in files:
        text = p.read_text(errors="replace")
        for secret in (hf, pat, pw):
            assert secret not in text, (str(p), secret[:8])
    assert "--hf-token ***" in (there / "stdout.log").read_text()
    assert not any(secret in json.dumps(rep) for secret in (hf, pat, pw))


def test_a_job_waiting_on_a_lock_in_the_container_is_named_within_30_s(infra, remote, dfdoctor):
    """Issue 23 on a target: the agent samples every process of the job twice; the lock and its holder are named
    from the container's own /proc (no py-spy there: the kernel names the wait)."""
    inside, host_side, local, env = remote
    (host_side / "hold.py").write_text("import fcntl, sys, time\nf = open(sys.argv[1], 'w')\n"
                                       "fcntl.flock(f, fcntl.LOCK_EX)\ntime.sleep(120)\n")
    (host_side / "take.py").write_text("import fcntl, sys\nprint('taking it', flush=True)\n"
                                       "f = open(sys.argv[1], 'w')\nfcntl.flock(f, fcntl.LOCK_EX)\n")
    lock = f"{inside}/data.lock"
    # full paths, quoted (the folder's name is hostile): the fixture's cleanup finds the processes by that name
    hold, take, q = f"{inside}/hold.py", f"{inside}/take.py", shlex.quote
    (host_side / "run.sh").write_text(f"python3 {q(hold)} {q(lock)} &\nsleep 2\nexec python3 {q(take)} {q(lock)}\n")
    t0 = time.monotonic()
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--watch", "60", "--cwd", inside, "--", "sh",
                      f"{inside}/run.sh")
    took = time.monotonic() - t0
    v = rep["verdict"]
    assert rc == 1 and v["cause"] == "waiting-on-lock", (v["summary"], v["evidence"])
    assert lock in v["summary"] and "holds it" in v["summary"] and "hold.py" in v["summary"], v["summary"]
    assert took < 40, f"named after {took:.0f} s"


def test_a_job_that_ended_while_its_recorder_is_stopped_in_the_container_is_said_ended(infra, remote, dfdoctor):
    """As tests/test_status.py's local test, in the container: the job exits while its recorder (its parent) is
    held with SIGSTOP there, a zombie nobody reaps, which the container's /proc still lists with the job's start
    time. The target's agent sent no process states: `status` called it running. It now reads the
    job's state (Z) and its recorder's (T) in the session it already opens, and status says what it says here:
    ended, its exit not known until it is reaped, the recorder to let go (typed through ssh and pct). Let go,
    the recorder reaps it and status says how it ended."""
    inside, host_side, local, env = remote
    (host_side / "train.py").write_text("import os, time\nhere = os.path.dirname(os.path.abspath(__file__))\n"
                                        "print('hi', flush=True)\n"
                                        "while not os.path.exists(os.path.join(here, 'go')):\n"
                                        "    time.sleep(0.05)\n")
    rc, rep = _launch(dfdoctor, infra, local, env, "--no-check", "--watch", "0", "--cwd", inside, "--", "python3",
                      f"{inside}/train.py")
    run = record.load(Path(rep["run"]["dir"]))
    rec, job = run.recorder["pid"], run.job_pid  # pids in the container's own namespace
    assert infra.container(f"kill -STOP {rec}").returncode == 0
    try:
        (host_side / "go").touch()
        deadline = time.monotonic() + 60
        while infra.container(f"cat /proc/{job}/stat").stdout.rsplit(")", 1)[-1].split()[:1] != ["Z"]:
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(0.2)
        rc, st = _status(dfdoctor, local, env, "--watch", "0")
    finally:
        infra.container(f"kill -CONT {rec}")
    v = st["verdict"]
    text = "\n".join([v["summary"], v["fix"], *v["evidence"]])
    assert rc == 1 and v["state"] == "unknown" and v["cause"] is None, text
    assert v["summary"].startswith(f"The job has ended: its process (pid {job}) exited and is a zombie"), text
    assert f"its recorder (pid {rec}) is stopped" in v["summary"], text
    assert "not known until it is reaped" in v["summary"] and "alive" not in text, text
    assert st["run"]["exit_code"] is None and st["run"]["signal"] is None, st["run"]
    assert f"pct exec {infra.vmid} -- sh -c" in v["fix"] and f"kill -CONT {rec}" in v["fix"], v["fix"]
    res = next(c for c in st["checks"] if c["id"] == "job.resources")
    assert not res["summary"].startswith("running"), res
    there = host_side / ".dfdoctor" / "runs" / run.id
    deadline = time.monotonic() + 60
    while not record.load(there).finished:
        assert time.monotonic() < deadline, "the recorder did not write the job's exit"
        time.sleep(0.2)
    rc, st = _status(dfdoctor, local, env, "--watch", "0")
    assert rc == 0 and st["verdict"]["state"] == "ok", st["verdict"]
