"""log.writable against real file systems: read-only and tiny tmpfs mounts, folders in the way, existing logs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess

import pytest

from conftest import run_dfdoctor
from support.in_process import run_here

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@contextlib.contextmanager
def tmpfs(path, options):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def log_check(cwd, log, *extra, here=True):
    """Through the same entry in this process (support/in_process): what each test reads is the check's record.
    `here=False`: through the console script, as some tests here still go (exit status, stdout, a FIFO's wait)."""
    res = (run_here if here else run_dfdoctor)("check", "--only", "log.writable", "--log", str(log), "--format",
                                               "json", *extra, cwd=cwd)
    assert res.returncode in (0, 1), res.stderr
    return res.returncode, json.loads(res.stdout)["checks"][0]


@needs_root
def test_read_only_file_system(tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        rc, rec = log_check(tmp_path, ro / "train.log")
    assert rc == 1 and rec["cause"] == "log-not-writable" and "read-only" in rec["summary"]


@needs_root
def test_disk_full(tmp_path):
    with tmpfs(tmp_path / "small", "size=256k") as small:
        subprocess.run(["dd", "if=/dev/zero", f"of={small / 'fill'}", "bs=4k"], capture_output=True)
        rc, rec = log_check(tmp_path, small / "train.log")
    assert rc == 1 and rec["cause"] == "disk-full"


@needs_root
def test_low_space_fails_under_threshold(tmp_path):
    with tmpfs(tmp_path / "tiny", "size=8m") as tiny:
        rc, rec = log_check(tmp_path, tiny / "train.log")
    assert rc == 1 and rec["cause"] == "disk-full" and "MiB free" in rec["summary"]
    assert rec["data"]["disk"]["free_mb"] < 100


@needs_root
def test_no_inodes_left(tmp_path):
    with tmpfs(tmp_path / "inodes", "size=64m,nr_inodes=40") as fs:
        for i in range(60):
            try:
                (fs / f"f{i}").touch()
            except OSError:
                break
        rc, rec = log_check(tmp_path, fs / "train.log")
    assert rc == 1 and rec["cause"] == "disk-full"


def test_folder_in_place_of_the_log(tmp_path):
    (tmp_path / "train.log").mkdir()
    rc, rec = log_check(tmp_path, "train.log")
    assert rc == 1 and rec["cause"] == "log-not-writable" and "is a folder" in rec["summary"]


def test_a_file_in_place_of_the_folder(tmp_path):
    (tmp_path / "logs").write_text("not a folder")
    rc, rec = log_check(tmp_path, "logs/train.log")
    assert rc == 1 and rec["cause"] == "log-not-writable"


def test_existing_log_is_never_touched_and_probe_is_removed(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("precious\n")
    before = log.stat()
    rc, rec = log_check(tmp_path, log, here=False)
    assert rc == 0 and rec["status"] == "ok"
    assert log.read_text() == "precious\n" and log.stat().st_mtime_ns == before.st_mtime_ns
    rc, rec = log_check(tmp_path, tmp_path / "new.log")
    assert rc == 0 and not (tmp_path / "new.log").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.log"]


def test_missing_folder_names_the_fix(tmp_path):
    rc, rec = log_check(tmp_path, "runs/today/train.log", here=False)
    assert rc == 1 and rec["cause"] == "log-dir-missing"
    assert rec["fix"] == f"mkdir -p {tmp_path / 'runs' / 'today'}"


def test_no_log_given_is_a_skip(tmp_path):
    res = run_dfdoctor("check", "--only", "log.writable", "--format", "json", cwd=tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["checks"][0]["status"] == "skip"


@pytest.mark.parametrize("command, env, warned", [
    (["python3", "train.py"], {}, True),
    (["python3", "-u", "train.py"], {}, False),
    (["python3", "train.py"], {"PYTHONUNBUFFERED": "1"}, False),
    (["bash", "-c", "echo hi"], {}, False),
])
def test_buffered_python_output_is_a_warning(tmp_path, command, env, warned):
    (tmp_path / "train.py").write_text("print(1)\n")
    full_env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    full_env.update(env)
    args = ["check", "--only", "log.writable", "--log", "x.log", "--format", "json", "--", *command]
    if env:  # the variable reaches the console script in its environment; the other cases go through run() here
        res = subprocess.run([os.path.join(os.path.dirname(__import__("sys").executable), "dfdoctor"), *args],
                             cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=60)
    else:
        res = run_here(*args, cwd=tmp_path, full_env=full_env)
    rec = json.loads(res.stdout)["checks"][0]
    assert (rec["cause"] == "output-buffered") == warned, rec
    assert res.returncode == 0


def test_a_long_valid_log_name_is_writable(tmp_path):
    """A 244-character name is valid (NAME_MAX is 255), but the probe's temp name built from it was not: the
    launch was blocked as log-not-writable."""
    name = "run-" + "x" * 236 + ".log"
    assert len(name) == 244
    rc, rec = log_check(tmp_path, tmp_path / name)
    assert rc == 0 and rec["status"] == "ok", rec
    assert not list(tmp_path.iterdir()), "the probe leaves nothing behind"


def test_a_log_name_over_name_max_is_said_so(tmp_path):
    rc, rec = log_check(tmp_path, tmp_path / ("y" * 300 + ".log"))
    assert rc == 1 and rec["cause"] == "log-not-writable" and "longer than the file system allows" in rec["summary"]


def test_a_fifo_log_is_reported_not_hung_on(tmp_path):
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    res = run_dfdoctor("check", "--only", "log.writable", "--log", str(fifo), "--format", "json", cwd=tmp_path,
                       timeout=60)
    rec = json.loads(res.stdout)["checks"][0]
    assert res.returncode == 1 and rec["status"] == "fail" and "named pipe (FIFO) that nothing reads" in rec["summary"]
    assert rec["duration_s"] < 5, rec


def test_a_fifo_with_a_reader_warns(tmp_path):
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL)
    try:
        fd = os.open(fifo, os.O_WRONLY)  # holds the pipe open: cat is surely reading when the check looks
        try:
            rc, rec = log_check(tmp_path, fifo, here=False)
        finally:
            os.close(fd)
    finally:
        reader.kill()
        reader.wait()
    assert rec["status"] == "warn" and "that something reads now" in rec["summary"]


def test_a_device_log_is_reported_without_opening_it(tmp_path):
    rc, rec = log_check(tmp_path, "/dev/null")
    assert rec["status"] == "warn" and "character device" in rec["summary"]
