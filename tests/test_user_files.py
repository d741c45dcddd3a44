"""Files the user names as input are read bounded (round 3 of do-no-harm): never a device, never more than a few
MiB, never waiting for ever on a FIFO nothing writes to, while bash's `<(cmd)` keeps working."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import DFDOCTOR, run_dfdoctor
from dfdoctor.errors import UsageError
from dfdoctor.safefile import read_user_file


def _sparse(path: Path, size: int = 3 << 30) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)  # 3 GB that cost no disk
    return path


@pytest.mark.parametrize("make", [lambda p: Path("/dev/zero"), lambda p: _sparse(p / "huge.txt")],
                         ids=["dev-zero", "sparse-3GB"])
@pytest.mark.parametrize("args", [("check", "--targets-file"), ("report",)], ids=["targets-file", "report"])
def test_a_device_or_a_huge_file_is_refused_at_once_with_exit_2(tmp_path, make, args):
    named = make(tmp_path)
    t0 = time.monotonic()
    r = run_dfdoctor(*args, str(named), cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    said = r.stderr.strip()
    assert said.count("\n") == 0 and str(named) in said
    assert ("not a regular file (a character device)" in said if named == Path("/dev/zero")
            else "larger than 8 MiB" in said), said
    assert time.monotonic() - t0 < 30


def test_a_fifo_nothing_writes_to_gives_up_after_its_stall(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(UsageError, match="nothing was written to it for 1 s"):
        read_user_file(fifo, "--targets-file fifo", stall_s=1.0)
    assert 0.9 < time.monotonic() - t0 < 5


def test_a_fifo_whose_writer_comes_late_is_read_whole(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def writer() -> None:
        time.sleep(0.5)
        with open(fifo, "w") as f:  # blocks until the reader below has opened it
            f.write("local\n")
            f.flush()
            time.sleep(0.5)
            f.write("ssh://a\n")

    th = threading.Thread(target=writer)
    th.start()
    assert read_user_file(fifo, "fifo", stall_s=3.0) == b"local\nssh://a\n"
    th.join()


@pytest.mark.slow
def test_report_and_targets_file_on_a_fifo_nothing_writes_to_exit_2_not_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (("report", str(fifo)), ("check", "--targets-file", str(fifo))):
        r = run_dfdoctor(*args, cwd=tmp_path, timeout=40)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "nothing was written to it for 10 s" in r.stderr


def test_bash_process_substitution_keeps_working_while_its_writer_runs(tmp_path):
    line = f"{DFDOCTOR} check --only target.reachable --targets-file <(sleep 2; echo local) --format json"
    r = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NO_COLOR": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"target.reachable"' in r.stdout


@pytest.mark.parametrize("option", ["--launcher", "--requirements"])
def test_launcher_or_requirements_that_is_not_a_file_says_so(tmp_path, option):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for named, kind in (("/dev/zero", "a character device"), (str(fifo), "a FIFO")):
        r = run_dfdoctor("check", option, named, "--", "python3", "x.py", cwd=tmp_path)
        assert r.returncode == 2
        assert f"{option} {named}: not a regular file ({kind})" in r.stderr, r.stderr
