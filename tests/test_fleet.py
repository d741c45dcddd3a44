"""`check` over many targets: one row per target, one verdict for all, and the target that differs named.

The real rows run on the LXC containers and the docker engine of tests/infra (a module present on two targets
and missing on the third), next to an ssh target that cannot be reached; the kill path (a target whose checks
overrun their deadline) runs real forked pipelines with a deadline made short."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes, fleet, fleet_specs
from dfdoctor.config import Config
from dfdoctor.context import Context
from dfdoctor.model import CheckRecord, Report, Status, TargetRow, Verdict, fail, ok
from dfdoctor.registry import check
from dfdoctor.render import render
from dfdoctor.rows import differences, verdict_over_rows
from dfdoctor.targets import parse_target
from infra.fixtures import Infra, docker_infra, infra  # noqa: F401
from support.in_process import run_here

UNREACHABLE = "ssh://root@127.0.0.1:1"


# --- which targets ------------------------------------------------------------------------------------------
def test_targets_file_reads_one_spec_a_line_with_comments(tmp_path):
    f = tmp_path / "targets"
    f.write_text("# the lab\nssh://root@a\n\n  lxc://200   # the container\nssh://root@a\ndocker://c\n")
    assert fleet_specs.target_specs(("local",), str(f)) == ["local", "ssh://root@a", "lxc://200", "docker://c"]


def test_targets_file_that_names_nothing_or_cannot_be_read_is_bad_usage(tmp_path, dfdoctor):
    empty = tmp_path / "empty"
    empty.write_text("# nothing here\n\n")
    for path in (empty, tmp_path / "missing"):  # the second through the same entry here (support/in_process)
        p = (dfdoctor if path == empty else run_here)("check", "--targets-file", str(path), "--", "python3", "-c",
                                                      "pass", cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and "--targets-file" in p.stderr


def test_a_malformed_target_among_many_stops_before_any_runs(tmp_path, dfdoctor):
    p = dfdoctor("check", "--target", "lxc://200", "--target", "ftp://nope", "--", "python3", "-c", "pass",
                 cwd=tmp_path)
    assert p.returncode == 2 and "ftp://nope" in p.stderr and p.stdout == ""


def test_launch_takes_one_target(tmp_path, dfdoctor):
    p = dfdoctor("launch", "--target", "lxc://200", "--target", "docker://c", "--", "python3", "-c", "pass",
                 cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "launch takes one --target" in p.stderr and p.stderr.count("\n") == 1
    assert not (tmp_path / ".dfdoctor").exists()  # nothing was started


# --- the model and what differs -----------------------------------------------------------------------------
def _rec(target: str, cid: str, status: Status, cause=None, summary="fine") -> CheckRecord:
    return CheckRecord(id=cid, phase="pre", status=status, summary=summary, cause=cause, target=target)


def _fleet_report() -> Report:
    targets = [f"ssh://n{i}" for i in range(5)]
    checks, rows = [], []
    for t in targets:
        bad = t == "ssh://n3"
        checks.append(_rec(t, "target.reachable", Status.OK, summary=f"{t} answers in 0.{len(t)} s"))
        checks.append(_rec(t, "deps.requirements", Status.FAIL if bad else Status.OK,
                           causes.DEPENDENCY_MISSING if bad else None,
                           "requirement yaml is not installed" if bad else "3 requirements satisfied"))
        env = {"kernel": "6.1", "nvidia_driver": "550.54" if t != "ssh://n1" else "535.1",
               "dev_shm_kb": "65536" if t == "ssh://n4" else "8000000", "cwd": "/w", "training_python": "python3"}
        verdict = Verdict("failed", causes.DEPENDENCY_MISSING, "1 of 2 check(s) found a problem", "pip install yaml") \
            if bad else Verdict("ok", None, "2 check(s) found no problem")
        rows.append(TargetRow(t, verdict, env, 1.0))
    return Report(tool_version="t", target=", ".join(targets), command=["python", "t.py"], started_at="",
                  finished_at="", verdict=verdict_over_rows(rows), checks=checks, targets=rows)


def test_differences_name_the_target_that_differs_and_nothing_else():
    diffs = {d.key: d for d in differences(_fleet_report())}
    assert set(diffs) == {"deps.requirements", "nvidia_driver", "dev_shm_kb"}  # summaries of ok checks differ: alike
    assert [t for t, _ in diffs["deps.requirements"].outliers] == ["ssh://n3"]
    assert diffs["deps.requirements"].usual == "ok" and diffs["deps.requirements"].usual_count == 4
    assert diffs["nvidia_driver"].outliers == (("ssh://n1", "535.1"),)
    assert diffs["dev_shm_kb"].outliers == (("ssh://n4", "65536"),)


def test_verdict_over_rows_leads_with_the_bad_row():
    v = _fleet_report().verdict
    assert v.state == "failed" and v.cause == causes.DEPENDENCY_MISSING
    assert "1 of 5 target(s)" in v.summary and "ssh://n3" in v.summary and v.fix.startswith("On ssh://n3:")


def test_every_renderer_shows_which_target_differs():
    report = _fleet_report()
    text = render(report, "text")
    assert "what differs:" in text and "on ssh://n3" in text and "535.1 on ssh://n1" in text
    # JSON: additions only; a dfdoctor/1 reader still finds every check, now tagged with its row
    doc = json.loads(render(report, "json"))
    assert doc["schema"] == "dfdoctor/1" and [r["target"] for r in doc["targets"]] == [f"ssh://n{i}" for i in range(5)]
    assert {c["target"] for c in doc["checks"]} == {r["target"] for r in doc["targets"]}
    assert Report.from_dict(doc).to_dict() == doc  # round-trips: `dfdoctor report` renders it again
    root = ET.fromstring(render(report, "junit"))
    failed = [s.get("name") for s in root.iter("testsuite") if s.get("failures") != "0"]
    assert failed == ["dfdoctor.pre@ssh://n3"] and root.get("tests") == "10"
    html = render(report, "html")
    assert 'id="targets"' in html and html.count('class="differs"') == 1  # the one check cell that differs
    assert "535.1 on ssh://n1" in html


def test_one_target_keeps_the_plain_report(tmp_path):
    """A single --target writes exactly the dfdoctor/1 document it always did: no targets[], no checks[].target."""
    rec = _rec(None, "log.writable", Status.OK)
    doc = Report(tool_version="t", target="local", command=[], started_at="", finished_at="",
                 verdict=Verdict("ok"), checks=[rec]).to_dict()
    assert "targets" not in doc and "target" not in doc["checks"][0]


# --- running side by side: the kill path --------------------------------------------------------------------
@check("fleettest.sleepy", title="sleeps on one target", timeout=60)
def _sleepy(ctx):
    if str(ctx.target) == "lxc://slow":
        time.sleep(60)
    yield ok("fine")


@check("fleettest.fails", title="fails on one target", timeout=10)
def _fails(ctx):
    yield fail("broken here", causes.IMPORT_ERROR) if str(ctx.target) == "lxc://bad" else ok("fine")


def test_a_target_that_overruns_its_deadline_is_its_own_row_and_leaves_nothing(monkeypatch):
    monkeypatch.setattr(fleet, "deadline_for", lambda checks, ctx, lanes=None: 3.0)
    contexts = [Context(target=parse_target(t), command=["python3", "t.py"]) for t in ("lxc://ok", "lxc://slow", "lxc://bad")]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    rows, records = fleet.run_targets(contexts, [_sleepy, _fails], [], Config(), "error", parallel=3)
    took = time.monotonic() - started
    assert [r.target for r in rows] == ["lxc://ok", "lxc://slow", "lxc://bad"]
    assert took < 15, took  # the slow one was killed at its deadline, not waited out
    by = {r.target: r for r in rows}
    assert by["lxc://ok"].verdict.state == "ok"
    assert by["lxc://bad"].verdict.cause == causes.IMPORT_ERROR
    slow = [r for r in records if r.target == "lxc://slow"]
    assert [(r.id, r.status) for r in slow] == [("target.checks", Status.TIMEOUT)]
    assert by["lxc://slow"].verdict.state == "failed"
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, f"left behind: {left}"


def test_parallel_bound_holds(monkeypatch):
    """With --parallel 2, never more than two targets run at once."""
    seen = []
    real = fleet._fork_one
    # the worker's own children from before (a session's server of tests/support/torch_forks.py) are not targets
    before = {p.pid for p in psutil.Process().children()}

    def counting(*a, **kw):
        seen.append(len([p for p in psutil.Process().children() if p.pid not in before]))
        return real(*a, **kw)

    monkeypatch.setattr(fleet, "_fork_one", counting)
    contexts = [Context(target=parse_target(f"lxc://t{i}"), command=["python3", "t.py"]) for i in range(5)]
    rows, _ = fleet.run_targets(contexts, [_fails], [], Config(), "error", parallel=2)
    assert len(rows) == 5 and max(seen) <= 1  # at most one other running when a second starts


def _lane_check(name: str):
    @check(f"fleettest.{name}", title="notes when it ran", timeout=20)
    def noting(ctx):
        start = time.monotonic()
        time.sleep(0.4)
        with open(os.environ["DFD_LANES_LOG"], "a") as f:
            f.write(f"{ctx.target} {start} {time.monotonic()}\n")
        yield ok("noted")
    return noting


LANE_CHECKS = [_lane_check(n) for n in ("one", "two", "three")]


def _most_at_once(log: Path) -> dict[str, int]:
    """For each target, the most of its checks that were running at one moment."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for line in log.read_text().splitlines():
        t, a, b = line.split()
        spans.setdefault(t, []).append((float(a), float(b)))
    return {t: max(sum(1 for a, b in ss if a <= s0 < b) for s0, _ in ss) for t, ss in spans.items()}


@pytest.mark.parametrize("lanes, most", [(1, 1), (3, 3)])
def test_lanes_bound_how_many_checks_one_target_runs_at_once(monkeypatch, tmp_path, lanes, most):
    log = tmp_path / "lanes.log"
    monkeypatch.setenv("DFD_LANES_LOG", str(log))
    monkeypatch.setattr(fleet, "lanes_per_target", lambda targets, parallel, cores=None: lanes)
    contexts = [Context(target=parse_target(t), command=["python3", "t.py"]) for t in ("lxc://a", "lxc://b")]
    rows, records = fleet.run_targets(contexts, LANE_CHECKS, [], Config(), "error", parallel=2)
    assert [r.verdict.state for r in rows] == ["ok", "ok"] and len(records) == 6
    assert [r.id for r in records if r.target == "lxc://a"] == [c.id for c in LANE_CHECKS]  # in check order
    assert _most_at_once(log) == {"lxc://a": most, "lxc://b": most}


def test_lanes_keep_every_running_target_within_a_few_checks_per_core():
    assert fleet.lanes_per_target(16, 16, cores=2) == 1  # 16 targets on 2 cores: one check each at a time
    assert fleet.lanes_per_target(16, 4, cores=2) == 2  # only 4 run at once
    assert fleet.lanes_per_target(2, 8, cores=16) == 32
    assert fleet.lanes_per_target(1, 8, cores=1) == fleet.CHECKS_PER_CORE


def test_a_target_unreachable_in_one_lane_is_reported_as_a_single_run_reports_it(monkeypatch, tmp_path):
    """Reachability first; then the rest at once (not one by one), and the same records as `check --target`."""
    from dfdoctor.checks.target_reachable import target_reachable
    log = tmp_path / "lanes.log"
    monkeypatch.setenv("DFD_LANES_LOG", str(log))
    monkeypatch.setattr(fleet, "lanes_per_target", lambda targets, parallel, cores=None: 1)
    ctx = Context(target=parse_target(UNREACHABLE), command=["python3", "t.py"])
    rows, records = fleet.run_targets([ctx], [target_reachable, *LANE_CHECKS], [], Config(), "error", parallel=1)
    assert rows[0].verdict.cause == causes.TARGET_UNREACHABLE
    assert [(r.id, r.status) for r in records][0] == ("target.reachable", Status.FAIL)
    assert _most_at_once(log) == {UNREACHABLE: 3}  # the others ran side by side, after reachability


# --- on the real infrastructure ------------------------------------------------------------------------------
@pytest.fixture
def three_workspaces(docker_infra: Infra):
    """/workspace/NAME in lxc 200, lxc 201 and the docker container, with train.py importing a helper module
    that exists in 200 and docker only."""
    name = f"dfd-fleet-{uuid.uuid4().hex[:8]}"
    places = [docker_infra.rootfs("200") / "workspace" / name, docker_infra.rootfs("201") / "workspace" / name,
              docker_infra.docker_workspace / name]
    for i, p in enumerate(places):
        p.mkdir(parents=True)
        (p / "train.py").write_text("import json\nimport fleet_helper\nprint('ok')\n")
        if i != 1:
            (p / "fleet_helper.py").write_text("X = 1\n")
        os.chmod(p, 0o777)
    yield f"/workspace/{name}"
    for p in places:
        shutil.rmtree(p, ignore_errors=True)


@pytest.mark.slow
def test_many_real_targets_one_row_each_the_odd_one_named(docker_infra, three_workspaces, dfdoctor, tmp_path):
    cwd = three_workspaces
    targets = ["lxc://200", "lxc://201", docker_infra.docker_target, UNREACHABLE]
    listed = tmp_path / "targets.txt"
    listed.write_text(f"# the last two\n{targets[2]}\n{targets[3]}  # nobody listens on port 1\n")
    p = dfdoctor("check", "--target", targets[0], "--target", targets[1], "--targets-file", str(listed),
                 "--only", "target.reachable", "--only", "imports.smoke", "--only", "log.writable",
                 "--cwd", cwd, "--log", f"{cwd}/train.log", "--format", "json", "--output", str(tmp_path / "r.json"),
                 "--format", "html", "--output", str(tmp_path / "r.html"), "--", "python3", "train.py",
                 cwd=tmp_path, env=docker_infra.env(), timeout=180)
    assert p.returncode == 1, p.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    rows = {r["target"]: r for r in doc["targets"]}
    assert list(rows) == targets
    assert rows["lxc://200"]["verdict"]["state"] == "ok" and rows[targets[2]]["verdict"]["state"] == "ok"
    assert rows["lxc://201"]["verdict"]["cause"] == causes.MISSING_MODULE
    assert rows[UNREACHABLE]["verdict"]["cause"] == causes.TARGET_UNREACHABLE
    smoke = {c["target"]: c for c in doc["checks"] if c["id"] == "imports.smoke"}
    assert "fleet_helper" in smoke["lxc://201"]["summary"]
    # what target.reachable learned about each reachable target is in its row, for comparison
    assert all("kernel" in rows[t]["environment"] for t in targets[:3])
    html = (tmp_path / "r.html").read_text()
    assert 'id="targets"' in html and "lxc://201" in html
    text = dfdoctor("report", str(tmp_path / "r.json")).stdout
    differs = text.split("what differs:")[1]
    assert "imports.smoke" in differs and "on lxc://201" in differs and UNREACHABLE in differs


def test_sigterm_ends_every_targets_child_and_leaves_nothing(tmp_path):
    """A CI job's timeout sends SIGTERM: `check --targets-file` died at once, and each target's child (with its ssh)
    and the results folder stayed behind. Now SIGTERM ends them as Ctrl-C does. The targets are ssh servers that
    accept and never speak, so the checks are still running when the signal comes."""
    import signal
    import socket
    import subprocess
    import tempfile

    from conftest import DFDOCTOR

    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    (tmp_path / "targets.txt").write_text("".join(f"ssh://root@127.0.0.1:{s.getsockname()[1]}\n" for s in listeners))
    (tmp_path / "t.py").write_text("print(1)\n")
    before = set(Path(tempfile.gettempdir()).glob("dfdoctor-fleet-*"))
    p = subprocess.Popen([DFDOCTOR, "check", "--targets-file", "targets.txt", "--", "python3", "t.py"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        kids: list[psutil.Process] = []
        while time.monotonic() < deadline and not any(k.name() == "ssh" for k in kids):
            time.sleep(0.05)
            kids = psutil.Process(p.pid).children(recursive=True)
        assert len([k for k in kids if k.name() == "ssh"]) >= 1, kids
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 130 and "interrupted" in err, (p.returncode, err)
        gone, alive = psutil.wait_procs(kids, timeout=10)
        assert not alive, [a.cmdline() for a in alive]
        assert set(Path(tempfile.gettempdir()).glob("dfdoctor-fleet-*")) <= before
    finally:
        if p.poll() is None:
            p.kill()
        for s in listeners:
            s.close()
