"""On a target (the real sshd -> pct -> LXC chain of tests/infra), dfdoctor's run folder is its own: a private
`mktemp -d` folder when the job's cwd cannot hold one, never a fixed shared path; a --run-dir with someone's
files is refused; paths come back exactly (printf, not dash's echo, which rewrites backslashes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from infra.fixtures import Infra, folder_in_container, infra  # noqa: F401

pytestmark = pytest.mark.slow

JOB = "import time\nprint('step', flush=True)\ntime.sleep({s})\n"


@pytest.fixture
def there(infra: Infra, tmp_path: Path):
    """A folder in container 200 whose name holds `\\t`, `\\n`-free backslashes and quotes."""
    with folder_in_container(infra, tmp_path, "dfd nh \\t\\\\x '") as f:
        yield f.name, f.inside, f.host_side, f.local, f.env


def _launch(dfdoctor, infra: Infra, local: Path, env: dict, *args: str):
    return dfdoctor("launch", "--target", infra.pct_target, "--no-check", "--format", "json", *args, cwd=local,
                    env=env, timeout=120)


def test_a_cwd_with_backslashes_is_the_run_folder_there(infra, there, dfdoctor):
    name, inside, host_side, local, env = there
    (host_side / "t.py").write_text(JOB.format(s=0))
    p = _launch(dfdoctor, infra, local, env, "--watch", "5", "--cwd", inside, "--", "python3", "t.py")
    assert p.returncode in (0, 1), p.stderr
    rep = json.loads(p.stdout)
    assert rep["run"]["remote_dir"] == f"{inside}/.dfdoctor/runs/{rep['run']['id']}"
    assert rep["verdict"]["cause"] != "killed-on-session-exit", rep["verdict"]
    folder = host_side / ".dfdoctor" / "runs" / rep["run"]["id"]
    assert (folder / "record.jsonl").exists() and (folder / ".dfdoctor-run").exists()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_fallback_run_folder_is_a_fresh_private_mktemp_folder(infra, there, dfdoctor):
    """The cwd does not exist there: the run folder is made by mktemp -d, whatever someone put in
    /tmp/dfdoctor-runs beforehand."""
    name, inside, host_side, local, env = there
    planted = infra.rootfs() / "tmp" / "dfdoctor-runs"
    planted.mkdir(exist_ok=True)
    before = sorted(x.name for x in planted.iterdir())
    (host_side / "t.py").write_text(JOB.format(s=0))
    p = _launch(dfdoctor, infra, local, env, "--watch", "5", "--cwd", f"{inside}/missing", "--", "python3",
                f"{inside}/t.py")
    assert p.returncode in (0, 1), p.stderr
    rep = json.loads(p.stdout)
    remote_dir = rep["run"]["remote_dir"]
    assert remote_dir.startswith("/tmp/dfdoctor-run.") and not remote_dir.startswith("/tmp/dfdoctor-runs")
    folder = infra.rootfs() / remote_dir.lstrip("/")
    try:
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert sorted(x.name for x in planted.iterdir()) == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_remote_run_dir_with_someone_elses_files_is_refused(infra, there, dfdoctor):
    name, inside, host_side, local, env = there
    theirs = host_side / "theirs"
    theirs.mkdir()
    (theirs / "agent.pyz").write_text("print('not yours')\n")
    (host_side / "t.py").write_text(JOB.format(s=0))
    p = _launch(dfdoctor, infra, local, env, "--watch", "3", "--run-dir", f"{inside}/theirs", "--", "python3",
                f"{inside}/t.py")
    rep = json.loads(p.stdout)
    assert rep["verdict"]["state"] == "failed" and "not empty" in json.dumps(rep["verdict"]), rep["verdict"]
    assert (theirs / "agent.pyz").read_text() == "print('not yours')\n"
    assert sorted(x.name for x in theirs.iterdir()) == ["agent.pyz"]


def test_the_job_on_an_ssh_target_writes_with_the_login_umask_not_077(infra, tmp_path, dfdoctor):
    """Round 3: ship.sh's `umask 077` (for the run folder) reached the job, so its log and every checkpoint it
    wrote were private to the user, where a team shares them through group permissions."""
    import os
    import time

    got = infra.ssh("umask")
    assert got.returncode == 0, got.stderr
    login = int(got.stdout.strip(), 8)
    assert login != 0o077, "the test needs a login umask other than 077 to tell them apart"
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o755)
    local = tmp_path / "local"
    local.mkdir()
    (work / "job.py").write_text("open('ckpt.pt', 'w').write('weights')\nprint('saved', flush=True)\n")
    p = dfdoctor("launch", "--target", infra.ssh_target, "--no-check", "--format", "json", "--watch", "15",
                 "--cwd", str(work), "--log", str(work / "train.log"), "--", "python3", "job.py", cwd=local,
                 env=infra.env(), timeout=120)
    assert p.returncode in (0, 1), p.stderr
    deadline = time.monotonic() + 20
    while not (work / "ckpt.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    rep = json.loads(p.stdout)
    assert rep["run"]["remote_dir"].startswith(str(work)), rep["run"]

    def mode(path: Path) -> int:
        return os.stat(path).st_mode & 0o777

    assert mode(work / "ckpt.pt") == 0o666 & ~login, oct(mode(work / "ckpt.pt"))
    assert mode(work / "train.log") == 0o644 & ~login, oct(mode(work / "train.log"))
    assert mode(Path(rep["run"]["remote_dir"])) == 0o700  # the run folder itself stays private
