"""A --target launch starts once the checks that can stop it have finished (`Check.gates`); those that cannot
(deps.requirements, persistence.session) finish beside the start in the workers forked with the others, and
their records join the report before the verdict (issue 45: on a pct target they were most of the wait before
the start). The runner's half runs real forked checks here; the launch's half runs on the real chain of
tests/infra (sshd -> pct shim -> lxc-attach -> container 200)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes, runner
from dfdoctor.context import Context
from dfdoctor.model import Result, Status
from dfdoctor.registry import check, discover
from infra.fixtures import Infra, folder_in_container, infra  # noqa: F401

UNTIL_STOPPED = ("import os, time\nhere = os.path.dirname(os.path.abspath(__file__))\nfor i in range(600):\n"
                 "    print('step', i, flush=True)\n    if os.path.exists(os.path.join(here, 'stop')):\n"
                 "        break\n    time.sleep(0.1)\n")


def _waits_for(go: Path, pid_file: Path):
    """A check that writes its worker's pid, then waits (at most a minute) for the test's go file."""
    def func(ctx):
        pid_file.write_text(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        yield Result(Status.OK, "the go file came" if go.exists() else "no go file")
    return func


def _pid(pid_file: Path) -> int:
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the check's worker never started"
        time.sleep(0.02)
    return int(pid_file.read_text())


def test_the_gate_returns_while_a_check_that_cannot_stop_the_launch_still_runs(tmp_path):
    go, pid_file = tmp_path / "go", tmp_path / "pid"
    gating = check("demo.gating", title="gating")(lambda ctx: [Result(Status.OK, "quick")])
    beside = check("demo.beside", title="beside", gates=False)(_waits_for(go, pid_file))
    gate, later = runner.run_gated([beside, gating], Context(cwd=tmp_path), "pre")
    assert [r.id for r in gate] == ["demo.gating"] and gate[0].status is Status.OK
    assert not pid_file.exists()  # it begins after the caller's start, not with the gate
    later.begin()
    assert psutil.pid_exists(_pid(pid_file))  # still waiting for its go file: the gate did not wait for it
    go.touch()
    recs = later.records()
    assert [(r.id, r.status, r.summary) for r in recs] == [("demo.beside", Status.OK, "the go file came"),
                                                           ("demo.gating", Status.OK, "quick")]


def test_a_check_beside_an_interrupted_launch_is_ended_with_what_it_started(tmp_path):
    go, pid_file = tmp_path / "go", tmp_path / "pid"
    beside = check("demo.beside", title="beside", gates=False)(_waits_for(go, pid_file))
    gate, later = runner.run_gated([beside], Context(cwd=tmp_path), "pre")
    assert gate == []  # nothing gates: the start need not wait at all
    later.begin()
    worker = psutil.Process(_pid(pid_file))
    later.stop()
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    with pytest.raises(ChildProcessError):
        os.waitpid(worker.pid, os.WNOHANG)  # reaped: no zombie-to-be left to the caller


def test_only_checks_whose_causes_cannot_stop_a_launch_leave_the_gate():
    """A check declared gates=False gives no cause that stops a launch (read from its module's source: a static
    reading, so a new cause added to such a check must come with a look at this declaration)."""
    blocking = {name for name in dir(causes) if name.isupper() and getattr(causes, name) in causes.LAUNCH_BLOCKERS}
    beside = [c for c in discover()[0] if not c.gates]
    assert {c.id for c in beside} == {"args.known", "deps.requirements", "persistence.session", "torchrun.record"}
    for c in beside:
        source = Path(c.func.__code__.co_filename).read_text()
        assert not [b for b in blocking if f"causes.{b}" in source], c.id
        assert c.id not in ("imports.smoke", "cuda.nccl")  # the start tried, and what foretold.certain reads


@pytest.mark.slow
def test_a_pct_launch_starts_before_persistence_session_ends_and_reports_it(infra, tmp_path, dfdoctor):
    with folder_in_container(infra, tmp_path, "dfd gated") as f:
        (f.host_side / "train.py").write_text(UNTIL_STOPPED)
        try:
            p = dfdoctor("launch", "--target", infra.pct_target, "--format", "json", "--only",
                         "target.reachable", "--only", "persistence.session", "--cwd", f.inside, "--log", f"{f.inside}/train.log",
                         "--", "python3", "-u", f"{f.inside}/train.py", cwd=f.local, env=f.env, timeout=180)
        finally:
            (f.host_side / "stop").touch()
        assert p.returncode == 0, p.stderr
        rep = json.loads(p.stdout)
        assert rep["verdict"]["state"] == "running", rep["verdict"]
        pre = {c["id"]: c for c in rep["checks"] if c["phase"] == "pre"}
        assert set(pre) == {"target.reachable", "persistence.session"}
        assert pre["persistence.session"]["status"] == "ok", pre["persistence.session"]
        # what the start waited for is the gate's own entry: target.reachable alone, not persistence.session's
        # experiment (a half-second margin and a heartbeat after its trial). (Compared by clock, a start slower
        # than that experiment under CI's load failed the test although the gate had not waited for it.)
        gate = next(e for e in rep["timeline"] if e["event"] == "pre-checks")
        assert gate["detail"].startswith("1 check(s) in "), gate
        kept = json.loads((Path(rep["run"]["dir"]) / "pre-checks.json").read_text())
        assert {c["id"] for c in kept} == {"target.reachable", "persistence.session"}  # what `status` links to
