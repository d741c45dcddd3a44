"""The seed, end to end, over the real chain: sshd on 127.0.0.1 -> `pct exec` -> lxc-attach -> container.

What really happens to the seed's line is observed from the host's side of the container's disk, and
`dfdoctor check --shell-command` must name it: the log lands on the host; with -tt the job dies with the
session; the corrected line it prints survives and logs inside the container.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes
from infra.fixtures import Infra, growing, infra  # noqa: F401

pytestmark = pytest.mark.slow

TRAIN = "import time\nfor i in range(150):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


@pytest.fixture
def seed(infra: Infra):
    """A work folder with the same path on the host and in the container; the script only in the container."""
    name = f"dfd-seed-{uuid.uuid4().hex[:8]}"
    work = f"/tmp/{name}"
    host, inside = Path(work), infra.rootfs() / "tmp" / name
    host.mkdir()
    inside.mkdir()
    (inside / "train.py").write_text(TRAIN)
    yield work, host, inside
    for p in psutil.process_iter(["cmdline"]):
        if any(work in a for a in p.info["cmdline"] or []):
            try:
                p.kill()
            except psutil.Error:
                pass
    shutil.rmtree(host, ignore_errors=True)
    shutil.rmtree(inside, ignore_errors=True)


def _jobs(work: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"])
            if "python3" in " ".join(p.info["cmdline"] or []) and f"{work}/train.py" in (p.info["cmdline"] or [])]


def _analyse(dfdoctor, line: str) -> dict:
    p = dfdoctor("check", "--only", "launch.path", "--fail-on", "warn", "--shell-command", line, "--format", "json")
    assert p.returncode == 1, p.stderr  # a reading of the line warns; --fail-on warn makes that exit 1
    return [c for c in json.loads(p.stdout)["checks"] if c["id"] == "launch.path"][0]


def test_seed_line_log_lands_on_the_host(infra, seed, dfdoctor):
    work, host, inside = seed
    line = (f"ssh -F {infra.ssh_config} dfdoctor-host "
            f"'pct exec {infra.vmid} -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &'")
    r = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    time.sleep(1.0)
    # What really happened: the job runs (in the container), its log is on the host, none in the container.
    assert _jobs(work), "the job is not running"
    assert growing(host / "train.log") and "step" in (host / "train.log").read_text()
    assert not (inside / "train.log").exists()
    rec = _analyse(dfdoctor, line)
    assert rec["cause"] == causes.LOG_ELSEWHERE
    # rehearsed: the sentinel ran in the container and its output went to a file only the host can see
    assert rec["basis"] == "observed"
    assert f"goes to {work}/train.log on dfdoctor-host" in rec["summary"] and f"container {infra.vmid}" in rec["summary"]


def test_seed_line_with_tty_dies_and_the_fix_survives(infra, seed, dfdoctor):
    work, host, inside = seed
    line = (f"ssh -tt -F {infra.ssh_config} dfdoctor-host "
            f"'pct exec {infra.vmid} -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &'")
    r = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    time.sleep(1.0)
    assert not _jobs(work), "the job survived a -tt session (the seed says it must not)"
    assert not growing(host / "train.log") and not (inside / "train.log").exists()
    rec = _analyse(dfdoctor, line)
    found = {f["cause"] for f in rec["data"]["findings"]}
    assert {causes.KILLED_ON_SESSION_EXIT, causes.LOG_ELSEWHERE} <= found
    fixed = rec["data"]["corrected"]
    assert fixed.startswith(f"ssh -F {infra.ssh_config} dfdoctor-host ") and "-tt" not in fixed
    # Whether the dying seed line's host shell opened its `> train.log` before the hang-up is a race: the file may
    # be there, empty. Start clean, so what follows shows where the corrected line writes.
    (host / "train.log").unlink(missing_ok=True)
    # The line dfdoctor gives really works through the same chain: alive after the session, log in the container.
    start = time.monotonic()
    r = subprocess.run(["bash", "-c", fixed], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - start < 5, "the corrected line's session did not return at once"
    time.sleep(1.0)
    assert _jobs(work)
    assert growing(inside / "train.log") and "step" in (inside / "train.log").read_text()
    assert not (host / "train.log").exists()


def test_corrected_line_with_hostile_paths_over_the_real_chain(infra, dfdoctor):
    """A work folder named with spaces, quotes, `$()` and `;`: the corrected line must start exactly that
    script with exactly those arguments, and no hop may run any part of a name."""
    from dfdoctor.shell import quote
    name = f"dfd seed 'q' $(touch pwned) ; touch pwned2 {uuid.uuid4().hex[:6]}"
    work = f"/tmp/{name}"
    inside = infra.rootfs() / "tmp" / name
    inside.mkdir()
    try:
        (inside / "train.py").write_text("import sys, time\nprint(sys.argv[1:], flush=True)\ntime.sleep(3)\n")
        remote = (f"pct exec {infra.vmid} -- nohup python3 {quote(work + '/train.py')} 'a b' '$HOME' "
                  f"> {quote(work + '/train.log')} 2>&1 &")
        line = f"ssh -tt -F {infra.ssh_config} dfdoctor-host {quote(remote)}"
        rec = _analyse(dfdoctor, line)
        fixed = rec["data"]["corrected"]
        r = subprocess.run(["bash", "-c", fixed], capture_output=True, text=True, timeout=20, cwd="/tmp",
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        for _ in range(30):
            if (inside / "train.log").exists() and (inside / "train.log").read_text():
                break
            time.sleep(0.1)
        assert (inside / "train.log").read_text() == "['a b', '$HOME']\n"
        assert not any(p.exists() for p in (Path("/tmp/pwned"), Path("/tmp/pwned2"), Path("/root/pwned"),
                                            infra.rootfs() / "pwned", infra.rootfs() / "root/pwned",
                                            infra.rootfs() / "root/pwned2"))
    finally:
        for p in psutil.process_iter(["cmdline"]):
            if any(work in a for a in p.info["cmdline"] or []):
                try:
                    p.kill()
                except psutil.Error:
                    pass
        shutil.rmtree(inside, ignore_errors=True)
