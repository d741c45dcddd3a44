"""The relay (targets/relay.py, agent/relay.py, agent/relay_here.py): one session carries a checked --target
launch's probes and target.reachable's ping, each probe in a child of its own with its own deadline (issue 45:
each was its own ssh session, `pct exec`, agent loader and bootstrap). All on the real chain of tests/infra
(sshd -> pct shim -> lxc-attach -> container 200); the container shares this kernel, so its processes are seen
(and counted) here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from conftest import DFDOCTOR
from dfdoctor.targets import parse_target, relay, remote_probe, transport
from infra.fixtures import Infra, folder_in_container, infra, procs_naming, ssh_config_env  # noqa: F401

ECHO = Path(__file__).parent / "infra" / "echo_probe.py"


def _line(args: list, timeout: float) -> bytes:
    return remote_probe.line(ECHO, args, timeout=timeout, env={}, cwd=None, python=None)


def _trailer(said: dict) -> dict:
    return remote_probe.split_answer(relay.text(said["out"]))[1]


def _until(cond, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _running(token: str) -> list:
    """The echo probes in the container that name `token` (not the relay or the bootstrap that carry it)."""
    return [p for p in procs_naming(token) if "echo_probe.py" in _cmd(p).split(" --hang")[0]]


def _cmd(p) -> str:
    """A process's command line as procs_naming read it (it may have ended since)."""
    return " ".join(p.info.get("cmdline") or [])


def test_a_hung_probe_is_its_own_answer_the_others_come_in_time_and_nothing_is_left(ssh_config_env):
    target = parse_target(ssh_config_env.pct_target)
    hung, late = f"hung-{os.getpid()}-{time.time_ns()}", f"late-{os.getpid()}-{time.time_ns()}"
    answers: dict = {}

    def ask(name: str, args: list, timeout: float) -> None:
        answers[name] = relay.carry(target, "python3", _line(args, timeout), timeout, timeout + 60)

    with transport.connected(target) as err:
        assert err is None
        assert relay.open_for(target, "python3") is not None
        try:
            threads = [threading.Thread(target=ask, args=("hung", ["--hang", hung], 300), daemon=True)]
            threads[0].start()
            _until(lambda: _running(hung), 60, "the hanging probe never started in the container")
            began = time.monotonic()
            threads += [threading.Thread(target=ask, args=("late", ["--hang", late], 4), daemon=True),
                        threading.Thread(target=ask, args=("quick", ["quick"], 60), daemon=True)]
            for t in threads[1:]:
                t.start()
            for t in threads[1:]:
                t.join(60)
            # each came as it ended, while the hung one still runs
            assert time.monotonic() - began < 60 and _running(hung), answers
            assert answers["quick"]["rc"] == 0 and json.loads(_trailer(answers["quick"])["answer"])["args"] == ["quick"]
            # the one past its own deadline: killed there, its stacks said (as a session of its own says them)
            assert _trailer(answers["late"])["timed_out"] is True, answers["late"]
            assert "echo_probe.py" in relay.text(answers["late"]["err"])
            assert not _running(late)
        finally:
            relay.close()
    threads[0].join(30)
    assert answers["hung"] is None  # the relay ended under it: its asker would take its own session
    _until(lambda: not _running(hung), 30, "the hung probe outlived the relay")
    assert not [c for c in _alive_children() if "relay-here" in c.cmdline()]  # its end here was waited for


def _alive_children() -> list:
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                c.cmdline()
                out.append(c)
        except psutil.Error:
            continue
    return out


def test_a_worker_that_goes_away_takes_its_probe_with_it_and_the_relay_serves_on(ssh_config_env):
    target = parse_target(ssh_config_env.pct_target)
    token = f"gone-{os.getpid()}-{time.time_ns()}"
    with transport.connected(target):
        assert relay.open_for(target, "python3") is not None
        try:
            pid = os.fork()
            if pid == 0:  # a check's worker: asks, and is killed while it waits (as the runner kills one)
                try:
                    relay.carry(target, "python3", _line(["--hang", token], 300), 300, 400)
                finally:
                    os._exit(0)
            _until(lambda: _running(token), 60, "the probe never started in the container")
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            _until(lambda: not _running(token), 30, "the probe outlived the worker that asked for it")
            said = relay.carry(target, "python3", _line(["after"], 60), 60, 120)
            assert said is not None and json.loads(_trailer(said)["answer"])["args"] == ["after"]
        finally:
            relay.close()


def test_what_the_relay_was_not_opened_for_takes_its_own_session(ssh_config_env):
    target = parse_target(ssh_config_env.pct_target)
    assert relay.carry(target, "python3", _line(["x"], 5), 5, 10) is None  # none opened
    with transport.connected(target):
        assert relay.open_for(target, "python3") is not None
        try:
            assert relay.carry(target, "/usr/bin/python3", _line(["x"], 5), 5, 10) is None  # another interpreter
            assert relay.ping(target, "python3", 5) is None  # opened without a ping
        finally:
            relay.close()


def _wrapped_ssh(folder: Path) -> Path:
    """An `ssh` first on PATH that notes each session in a file of its own (when, and its words) and execs the
    real one; the folder of those notes."""
    notes = folder / "sessions"
    notes.mkdir()
    real = subprocess.run(["sh", "-c", "command -v ssh"], capture_output=True, text=True).stdout.strip()
    (folder / "ssh").write_text(f"#!/bin/sh\nf=$(mktemp {notes}/s.XXXXXX)\n"
                                f"{{ date +%s.%N; printf '%s' \"$*\" | tr '\\n' ' '; }} > \"$f\"\n"
                                f"exec {real} \"$@\"\n")
    (folder / "ssh").chmod(0o755)
    return notes


def _sessions(notes: Path) -> list[tuple[float, str]]:
    out = []
    for f in notes.iterdir():
        when, _, words = f.read_text().partition("\n")
        out.append((float(when), words))
    return sorted(out)


@pytest.mark.slow
def test_a_checked_pct_launch_opens_one_session_for_its_probes_before_the_start(infra, tmp_path):
    with folder_in_container(infra, tmp_path, "dfd relay") as f:
        (f.host_side / "train.py").write_text("import os, time\nhere = os.path.dirname(os.path.abspath(__file__))\n"
                                              "while not os.path.exists(os.path.join(here, 'stop')):\n"
                                              "    print('step', flush=True)\n    time.sleep(0.1)\n")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        log = _wrapped_ssh(bin_dir)
        env = {**os.environ, **f.env, "NO_COLOR": "1"}
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        try:
            p = subprocess.run([DFDOCTOR, "launch", "--target", infra.pct_target, "--format", "json", "--cwd",
                                f.inside, "--log", f"{f.inside}/train.log", "--", "python3", "-u",
                                f"{f.inside}/train.py"], cwd=f.local, env=env, capture_output=True, text=True,
                               timeout=240)
        finally:
            (f.host_side / "stop").touch()
        assert p.returncode == 0, p.stderr
        rep = json.loads(p.stdout)
        assert rep["verdict"]["state"] == "running", rep["verdict"]
        pre = {c["id"]: c for c in rep["checks"] if c["phase"] == "pre"}
        assert pre["target.reachable"]["status"] == "ok" and pre["imports.smoke"]["status"] == "ok", pre
        launched = next(e["t"] for e in rep["timeline"] if e["event"] == "launched")
        before = [words for t, words in _sessions(log) if t < launched and "pct exec" in words]
        relays = [w for w in before if "' relay sh -c " in w]
        own = [w for w in before if w.rstrip().endswith("' probe")]
        # one session carried the gating probes (and the ping: target.reachable takes its own only where the
        # relay's did not come within PING_WAIT_S), none took its own
        assert len(relays) == 1 and own == [], (relays, own)


@pytest.mark.slow
def test_an_interrupted_checked_launch_ends_the_relay_here_and_there(infra, tmp_path):
    with folder_in_container(infra, tmp_path, "dfd relay int") as f:
        # an interpreter whose path names the folder: every process of the relay, here and there, names it
        (f.host_side / "py").symlink_to("/usr/bin/python3")
        (f.host_side / "slowmod.py").write_text("import time\ntime.sleep(600)\n")  # imports.smoke hangs in it
        (f.host_side / "train.py").write_text("import slowmod\n")
        proc = subprocess.Popen([DFDOCTOR, "launch", "--target", infra.pct_target, "--python", f"{f.inside}/py",
                                 "--format", "json", "--cwd", f.inside, "--log", f"{f.inside}/train.log", "--",
                                 "python3", f"{f.inside}/train.py"], cwd=f.local,
                                env={**os.environ, **f.env, "NO_COLOR": "1"}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            mark = f.name[-8:]
            _until(lambda: [p for p in procs_naming(mark) if "import_probe.py" in _cmd(p)], 120,
                   "the import probe never ran in the container")
            here = [c for c in psutil.Process(proc.pid).children() if " relay-here " in " ".join(c.cmdline())]
            assert here and [p for p in procs_naming(mark) if "' relay sh -c " in _cmd(p) or
                             " relay sh -c " in _cmd(p)], "no relay carried it"
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        # the relay there, its probe and its session here (they name the folder), and its end here: all ended
        _until(lambda: not procs_naming(f.name[-8:]), 30,
               f"left running after the interrupt: {[_cmd(p)[:200] for p in procs_naming(f.name[-8:])]}")
        _until(lambda: not here[0].is_running() or here[0].status() == psutil.STATUS_ZOMBIE, 30,
               "the relay's end here outlived the interrupted launch")
