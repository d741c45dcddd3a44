"""Helpers for the launch/status tests: run `dfdoctor launch` on a job from this folder, read the verdict, and
kill whatever a run left running (jobs judged hung or buffered keep running by design)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

JOBS = Path(__file__).resolve().parent
DFDOCTOR = str(Path(sys.executable).parent / "dfdoctor")
PY = sys.executable


def job_env(**extra: str) -> dict[str, str]:
    """The test environment without PYTHONUNBUFFERED (set on this machine), so buffering is Python's default."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


def needs_torch() -> None:
    """Skip the test unless torch is installed, without importing it here: the test's job imports it, and a
    worker that imports torch pays ~3 CPU-s once (pytest.importorskip did, in each worker such a test ran on)."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")


def dfdoctor(*args: str, cwd: Path, env: Optional[dict] = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the installed console script in a real subprocess."""
    return subprocess.run([DFDOCTOR, *args], cwd=cwd, env=env or job_env(), capture_output=True, text=True,
                          timeout=timeout)


def launch(work: Path, *command: str, watch: float = 5, check: bool = False, log: Optional[str] = "train.log",
           extra: tuple[str, ...] = (), env: Optional[dict] = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`dfdoctor launch` a command in `work`; return the process and its JSON report."""
    out = work / f"report-{time.monotonic_ns()}.json"
    args = ["launch", "--cwd", str(work), "--watch", str(watch), "--format", "json", "--output", str(out),
            "--format", "text"]
    if log:
        args += ["--log", log if os.path.isabs(log) else str(work / log)]
    if not check:
        args.append("--no-check")
    proc = dfdoctor(*args, *extra, "--", *command, cwd=work, env=env)
    assert out.exists(), f"no report written; rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc, json.loads(out.read_text())


def status(work: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`dfdoctor status` in `work`; return the process and its JSON report."""
    out = work / f"status-{time.monotonic_ns()}.json"
    proc = dfdoctor("status", "--cwd", str(work), "--format", "json", "--output", str(out), "--format", "text",
                    *args, cwd=work)
    assert out.exists(), f"no report written; rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc, json.loads(out.read_text())


def job(name: str, *args: str) -> list[str]:
    """argv running a job script from this folder with dfdoctor's interpreter."""
    return [PY, str(JOBS / name), *args]


def text_of(report: dict) -> str:
    """The verdict's summary and evidence as one string, to look for the culprit in."""
    v = report["verdict"]
    return "\n".join([v["summary"], v["fix"], *v["evidence"]])


def records(work: Path) -> list[Path]:
    """Every run folder under `work` (default place and any --run-dir inside it)."""
    return [p.parent for p in work.rglob("spec.json")]


def kill_runs(work: Path) -> None:
    """Kill the job (its whole process group) and the recorder of every run under `work`."""
    from dfdoctor.run import record
    from dfdoctor.agent.procfs import proc_start_time, proc_state

    for d in records(work):
        run = record.load(d)
        if run.recorder and proc_start_time(run.recorder["pid"]) == run.recorder.get("start_ticks"):
            try:
                os.kill(run.recorder["pid"], signal.SIGKILL)
            except OSError:
                pass
        if run.spawned and run.job_pid:  # its whole tree: torchrun's ranks run in sessions of their own
            _kill_tree(run.job_pid, run.spawned.get("start_ticks") or 0)
        if run.spawned:  # the job's group, leader or not (a dead leader may leave workers behind)
            for pid in _group(run.spawned["pgid"], run.spawned.get("start_ticks") or 0):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    # until each recorder has ended; a zombie has (it writes nothing more): waiting for it to be reaped waited
    # for the reaper of orphans, here PID 1 every 2 s, up to 2 s a test
    deadline = time.monotonic() + 5
    for d in records(work):
        run = record.load(d)
        while run.recorder and proc_start_time(run.recorder["pid"]) == run.recorder.get("start_ticks") \
                and proc_state(run.recorder["pid"]) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)


def _kill_tree(pid: int, since_ticks: int) -> None:
    """SIGKILL a live job and all its descendants, collected before the first kill (orphans are re-parented)."""
    import psutil
    from dfdoctor.agent.procfs import proc_start_time

    if (proc_start_time(pid) or 0) < since_ticks:
        return  # the pid was reused: not our job
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def _group(pgid: int, since_ticks: int) -> list[int]:
    """Processes in process group `pgid` started no earlier than the job (a reused pgid is not ours)."""
    from dfdoctor.agent.procfs import proc_start_time

    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getpgid(int(name)) == pgid and (proc_start_time(int(name)) or 0) >= since_ticks:
                    out.append(int(name))
            except OSError:
                continue
    return out


def wait_for(pred, timeout: float = 10.0, step: float = 0.05) -> bool:
    """Poll `pred` until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


def silent_for(run_dir: Path) -> float:
    """Seconds since the job's last output, as its recorder's heartbeat says (0 before it wrote anything)."""
    try:
        last = json.loads((run_dir / "heartbeat").read_text() or "{}").get("last_output_t")
    except (OSError, ValueError):
        return 0.0
    return time.time() - last if last else 0.0


def launch_to_end(work: Path, *command: str, timeout: float = 120, **kw) -> tuple[subprocess.CompletedProcess, dict]:
    """`dfdoctor launch` a job that ends by itself, then (if the watch ended first, calling it running) wait for
    its end and return `dfdoctor status` of it: the verdict of the finished job."""
    from dfdoctor.run import record

    proc, rep = launch(work, *command, **kw)
    if rep["verdict"]["state"] != "running":
        return proc, rep
    run_dir = Path(rep["run"]["dir"])
    assert wait_for(lambda: record.load(run_dir).finished, timeout=timeout, step=0.5), "the job did not end"
    return status(work, run_dir.name)


def fill_up(path: Path) -> None:
    """Write zeros to `path` until its file system is full, as a job's output fills a disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
