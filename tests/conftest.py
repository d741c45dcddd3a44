"""Shared test fixtures: the installed console script, and a guard that no test leaves a process behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DFDOCTOR = str(BIN / "dfdoctor")

# Every process a test starts inherits this marker, daemons included, so the session can find leftovers.
SESSION_MARK = "DFDOCTOR_TEST_SESSION"
os.environ[SESSION_MARK] = uuid.uuid4().hex

# The user's index of runs (dfdoctor.run.index) is this session's own: a plain `status` in a folder without runs
# must not find another session's launches (seven sessions share this machine's home folder).
import tempfile  # noqa: E402
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="dfdoctor-test-state-")


def marked_processes() -> list[psutil.Process]:
    """Processes (other than pytest itself) that carry this test session's marker in their environment."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid"]):
        if p.pid == me:
            continue
        try:
            if p.environ().get(SESSION_MARK) == os.environ[SESSION_MARK] and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes():
    """Fail the session if any process started by a test is still alive at the end (then kill it)."""
    yield
    deadline = time.monotonic() + 5
    left = marked_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes()
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    assert not left, "processes left behind: " + "; ".join(
        f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in left if p.is_running())


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory, monkeypatch):
    """Each test gets an empty dfdoctor cache (XDG_CACHE_HOME, inherited by every dfdoctor it starts): no test
    reuses another's compile.race reproduction, and none writes into the user's ~/.cache."""
    path = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path / "dfdoctor"


def run_dfdoctor(*args: str, cwd: os.PathLike | str | None = None, env: dict | None = None,
                 timeout: float = 120, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run the installed `dfdoctor` console script in a real subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("NO_COLOR", "1")
    return subprocess.run([DFDOCTOR, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, input=input)


@pytest.fixture
def dfdoctor():
    """The `run_dfdoctor` helper as a fixture."""
    return run_dfdoctor


def broken_plugin_site(site: Path) -> Path:
    """A site folder holding a distribution whose dfdoctor check cannot be imported (put it on PYTHONPATH)."""
    dist = site / "dfdoctor_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dfdoctor-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dfdoctor.checks]\nbroken.import = no_such_module_xyz:check\n")
    return site


def pip_install_to(src: Path, target: Path) -> None:
    """A real `pip install` of a local distribution into its own folder (put it on PYTHONPATH to use it)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True, timeout=300)
