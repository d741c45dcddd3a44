"""The rehearsal's second wall (shared/REHEARSAL.md, doctor/rehearse/wall.py): as root with `unshare`, the line runs
in a private mount namespace whose user folders are covered by a throw-away overlay. A write the analysis missed
(here: `rm` and `touch` let through as if they were plumbing) never reaches the user's files, what the rehearsal
observes is the same, and nothing of the wall stays: no upper folder, no process in its namespace."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes
from dfdoctor.rehearse import judge, rewrite, wall
from dfdoctor.rehearse.runner import rehearse
from dfdoctor.shell import quote
from infra.fixtures import infra, kill_naming  # noqa: F401

pytestmark = pytest.mark.skipif(wall.why_not_here() is not None, reason=f"no wall here: {wall.why_not_here()}")

TRAIN = "import time\nfor i in range(400):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A user's folder, and an analysis that misses `rm` and `touch` (they run as `cd` would)."""
    (tmp_path / "t.py").write_text(TRAIN)
    (tmp_path / "F").write_text("the user's file\n")
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"rm", "touch"})
    home = Path(os.environ.get("HOME", "/root")) / f"dfd-wall-{uuid.uuid4().hex[:8]}"
    yield tmp_path, home
    home.unlink(missing_ok=True)


def _missed(home: Path) -> str:
    return f"rm -f F; touch made; touch {home}; nohup python3 -u t.py > t.log 2>&1 &"


def _in_wall(tag: str) -> list[int]:
    """Processes that still hold the wall's mounts (its namespace lives as long as one does)."""
    held = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if wall.folder(tag) in (p / "mountinfo").read_text():
                held.append(int(p.name))
        except OSError:
            continue
    return held


def _nothing_left(r) -> None:
    tag = r.plan.tag
    deadline = time.monotonic() + 5
    while (_in_wall(tag) or any(f"dfdoctor-rh-{tag}" in " ".join(p.info["cmdline"] or [])
                                 for p in psutil.process_iter(["cmdline"]))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _in_wall(tag)
    assert not Path(wall.folder(tag)).exists()
    assert not Path(f"/tmp/dfdoctor-rh-{tag}").exists()


def test_a_write_the_analysis_missed_is_thrown_away(work):
    folder, home = work
    r = rehearse(_missed(home), cwd=str(folder))
    time.sleep(0.3)
    assert "your machine: up, over /" in r.wall, judge.facts(r)
    assert sorted(p.name for p in folder.iterdir()) == ["F", "t.py"], judge.facts(r)
    assert (folder / "F").read_text() == "the user's file\n"
    assert not home.exists()
    assert judge.passed(r), judge.facts(r)  # the job was seen as without the wall: alive, logging where asked
    assert r.wall in judge.facts(r)
    _nothing_left(r)


def test_without_the_wall_the_missed_write_is_done(work, monkeypatch):
    """The control: the same line, with the wall switched off, deletes the user's file (the hook really leaks)."""
    folder, home = work
    monkeypatch.setattr(wall, "why_not_here", lambda: "switched off by the test")
    r = rehearse(_missed(home), cwd=str(folder))
    assert not (folder / "F").exists() and home.exists(), judge.facts(r)
    assert "your machine: rehearsed without a wall (switched off by the test)" in r.wall, r.wall


def test_the_wall_changes_nothing_the_rehearsal_observes(tmp_path):
    """A missing log folder is still missing (an observed failure), the session's folder is where it was."""
    (tmp_path / "t.py").write_text(TRAIN)
    r = rehearse("nohup python3 -u t.py > nologs/t.log 2>&1 &", cwd=str(tmp_path))
    assert "your machine: up" in r.wall, judge.facts(r)
    assert [f.cause for f in judge.findings(r)] == [causes.LOG_DIR_MISSING], judge.facts(r)
    r = rehearse("mkdir -p logs; nohup python3 -u t.py > t.log 2>&1 &", cwd=str(tmp_path))
    assert judge.passed(r) and r.job_place.start["cwd"] == str(tmp_path), judge.facts(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.py"]
    _nothing_left(r)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ssh", "pct"])
def test_a_write_the_analysis_missed_is_thrown_away_at_the_ssh_host_and_in_the_container(infra, target,
                                                                                         monkeypatch):
    """The same missed writes, at the ssh host (its remote command inside the wall) and inside container 200
    (pct exec's words inside the wall there)."""
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.ssh_config))
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"rm", "touch"})
    path = f"/tmp/dfd-wall-{uuid.uuid4().hex[:8]}"
    here = (infra.rootfs() if target == "pct" else Path("/")) / path.lstrip("/")
    here.mkdir()
    (here / "t.py").write_text(TRAIN)
    (here / "F").write_text("the user's file\n")
    inner = f"cd {path} && rm -f F; touch made; nohup python3 -u t.py > t.log 2>&1 &"
    line = (f"ssh root@dfdoctor-host {quote(inner)}" if target == "ssh" else
            f"ssh root@dfdoctor-host {quote(f'pct exec {infra.vmid} -- sh -c {quote(inner)}')}")
    try:
        r = rehearse(line)
        time.sleep(0.3)
        where = "dfdoctor-host" if target == "ssh" else f"container {infra.vmid} on dfdoctor-host"
        assert f"{where}: up, over " in r.wall, judge.facts(r)
        assert sorted(p.name for p in here.iterdir()) == ["F", "t.py"], judge.facts(r)
        assert r.started and r.alive, judge.facts(r)
        _nothing_left(r)
        assert r.plan.tag not in infra.container("ls -a /dev/shm /tmp").stdout  # the container's own /dev/shm
    finally:
        kill_naming(path)
        shutil.rmtree(here, ignore_errors=True)
