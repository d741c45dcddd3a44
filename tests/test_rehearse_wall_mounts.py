"""The second wall covers every writable mount a place can see (doctor/rehearse/wall.sh reads them from that
place's /proc/self/mountinfo), not a list of the line's own folders: a write the analysis missed (`rm` and `touch`
let through as if they were plumbing) into /dev/shm, /var/tmp or a folder at the root that nothing names (a
/srv-like one) lands in a throw-away layer, on this machine, at the ssh host and inside the LXC container alike,
and the user's files there survive."""

from __future__ import annotations

import subprocess
import shutil
import time
import uuid
from pathlib import Path

import pytest

from dfdoctor.rehearse import judge, rewrite, wall
from dfdoctor.rehearse.runner import rehearse
from dfdoctor.shell import quote
from infra.fixtures import docker_infra, infra, kill_naming  # noqa: F401
from test_rehearse_wall import TRAIN, _nothing_left

pytestmark = pytest.mark.skipif(wall.why_not_here() is not None, reason=f"no wall here: {wall.why_not_here()}")


class Place:
    """Shell at one place, for the test's own bookkeeping (never through dfdoctor)."""

    def __init__(self, where: str, infra=None):
        self.where, self.infra = where, infra

    def sh(self, script: str) -> str:
        if self.where == "pct":
            p = self.infra.container(script)
        else:
            p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, (script, p.stdout, p.stderr)
        return p.stdout


def _folders(mark: str) -> list[str]:
    return [f"/dev/shm/{mark}", f"/var/tmp/{mark}", f"/{mark}-srv"]


def _setup(place: Place, mark: str) -> str:
    made = " ".join(_folders(mark))
    # /var/tmp may be missing in the container: made for the test, removed after it
    place.sh(f"[ -d /var/tmp ] || {{ mkdir -p /var/tmp && touch /var/tmp/.{mark}; }}; mkdir -p {made}; "
             + "; ".join(f"echo \"the user's file\" > {d}/F" for d in _folders(mark))
             + f"; printf %s {quote(TRAIN)} > /{mark}-srv/t.py")
    return (f"cd /{mark}-srv && "
            + "; ".join(f"rm -f {d}/F; touch {d}/made" for d in _folders(mark))
            + "; nohup python3 -u t.py > t.log 2>&1 &")


def _survived(place: Place, mark: str) -> str:
    return place.sh("; ".join(f"ls -A {d}; cat {d}/F" for d in _folders(mark)) + " 2>/dev/null; true")


def _cleanup(place: Place, mark: str) -> None:
    kill_naming(mark)
    place.sh(f"rm -rf {' '.join(_folders(mark))}; [ -e /var/tmp/.{mark} ] && rm -rf /var/tmp; true")


def _expected(mark: str) -> str:
    return "".join(("F\nt.py\n" if d.endswith("-srv") else "F\n") + "the user's file\n" for d in _folders(mark))


def test_missed_writes_into_every_mount_are_thrown_away_here(monkeypatch):
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"rm", "touch"})
    mark, place = f"dfd-wallm-{uuid.uuid4().hex[:8]}", Place("here")
    line = _setup(place, mark)
    try:
        r = rehearse(line)
        time.sleep(0.3)
        assert _survived(place, mark) == _expected(mark), judge.facts(r)
        assert "your machine: up, over /" in r.wall and "/dev/shm" in r.wall, r.wall
        assert r.started and r.alive, judge.facts(r)
        _nothing_left(r)
    finally:
        _cleanup(place, mark)


def test_without_the_wall_the_missed_writes_are_done(monkeypatch):
    """The control: the same line with the wall switched off deletes the user's files at all three places."""
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"rm", "touch"})
    monkeypatch.setattr(wall, "why_not_here", lambda: "switched off by the test")
    mark, place = f"dfd-wallm-{uuid.uuid4().hex[:8]}", Place("here")
    line = _setup(place, mark)
    try:
        rehearse(line)
        assert _survived(place, mark).count("the user's file") == 0
    finally:
        _cleanup(place, mark)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ssh", "pct"])
def test_missed_writes_into_every_mount_are_thrown_away_at_the_ssh_host_and_in_the_container(infra, target,
                                                                                              monkeypatch):
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.ssh_config))
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"rm", "touch"})
    mark, place = f"dfd-wallm-{uuid.uuid4().hex[:8]}", Place(target, infra)
    inner = _setup(place, mark)
    line = (f"ssh root@dfdoctor-host {quote(inner)}" if target == "ssh" else
            f"ssh root@dfdoctor-host {quote(f'pct exec {infra.vmid} -- sh -c {quote(inner)}')}")
    try:
        r = rehearse(line)
        time.sleep(0.3)
        assert _survived(place, mark) == _expected(mark), judge.facts(r)
        where = "dfdoctor-host" if target == "ssh" else f"container {infra.vmid} on dfdoctor-host"
        assert f"{where}: up, over /" in r.wall and "/dev/shm" in r.wall.split(where)[1], r.wall
        assert r.started and r.alive, judge.facts(r)
        _nothing_left(r)
        assert r.plan.tag not in infra.container("ls -a /dev/shm /tmp").stdout
    finally:
        _cleanup(place, mark)



@pytest.mark.slow
def test_a_line_hiding_code_is_not_run_in_a_container_without_a_wall(docker_infra, monkeypatch):  # noqa: F811
    """Where no wall can stand (a docker container that refuses a mount namespace), a line the reader found hiding
    code is not rehearsed there at all: the missed write (`touch`, let through as plumbing) is never done, and
    nothing is said to have been observed."""
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"touch"})
    name = f"dfd-wallm-{uuid.uuid4().hex[:8]}"
    ws = docker_infra.docker_workspace / name
    ws.mkdir()
    (ws / "t.py").write_text(TRAIN)
    try:
        inner = (f"cd /workspace/{name} && declare -i N=1; touch made; "
                 "nohup python3 -u t.py > t.log 2>&1 &")
        r = rehearse(f"docker exec {docker_infra.docker_name} sh -c {quote(inner)}")
        assert sorted(p.name for p in ws.iterdir()) == ["t.py"], judge.facts(r)
        assert "no wall could stand at container" in r.unobservable and not judge.findings(r), judge.facts(r)
    finally:
        kill_naming(name)
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.slow
def test_a_line_hiding_code_is_not_run_at_a_host_its_quoting_keeps_unwalled(infra, monkeypatch):  # noqa: F811
    """An ssh remote command whose quoting cannot carry the wall (a `"..."` word with `$` in it) runs there without
    one: a line the reader found hiding code is then not rehearsed at all, and the missed write is never done."""
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.ssh_config))
    monkeypatch.setattr(rewrite, "RUNS", rewrite.RUNS | {"touch"})
    folder = Path(f"/tmp/dfd-wallm-{uuid.uuid4().hex[:8]}")
    folder.mkdir()
    (folder / "t.py").write_text(TRAIN)
    try:
        r = rehearse(f'ssh root@dfdoctor-host "cd {folder} && declare -i N=1; touch made$HOME_SUFFIX; '
                     'nohup python3 -u t.py > t.log 2>&1 &"')
        assert sorted(p.name for p in folder.iterdir()) == ["t.py"], judge.facts(r)
        assert "quoting cannot carry a wall to dfdoctor-host" in r.unobservable, judge.facts(r)
    finally:
        kill_naming(folder.name)
        shutil.rmtree(folder, ignore_errors=True)
