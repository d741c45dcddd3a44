"""`dfdoctor check --target pct://...` through the real chain: the log is judged where the job runs."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import run_dfdoctor
from infra.fixtures import Infra, infra  # noqa: F401

pytestmark = pytest.mark.slow


def test_log_is_checked_in_the_container_not_here(infra: Infra, tmp_path):
    env = {"DFDOCTOR_SSH_CONFIG": str(infra.ssh_config)}
    # A folder that exists here (this test's tmp_path) but not in the container.
    (tmp_path / "logs").mkdir()
    missing = run_dfdoctor("check", "--target", infra.pct_target, "--only", "log.writable", "--log",
                           str(tmp_path / "logs" / "train.log"), "--cwd", "/root", "--format", "json", cwd=tmp_path, env=env)
    rec = json.loads(missing.stdout)["checks"][0]
    assert missing.returncode == 1 and rec["cause"] == "log-dir-missing", rec
    # A folder that exists only in the container is fine there, though it does not exist here.
    (infra.rootfs() / "srv" / "only-in-container").mkdir(parents=True, exist_ok=True)
    fine = run_dfdoctor("check", "--target", infra.pct_target, "--only", "log.writable", "--log",
                        "/srv/only-in-container/train.log", "--cwd", "/root", "--format", "json", cwd=tmp_path, env=env)
    rec = json.loads(fine.stdout)["checks"][0]
    assert fine.returncode == 0 and rec["status"] == "ok", rec
    assert not list((infra.rootfs() / "srv" / "only-in-container").iterdir())  # the probe file is gone


def test_malformed_target_is_a_usage_error(tmp_path):
    res = run_dfdoctor("check", "--target", "pct://host", cwd=tmp_path)
    assert res.returncode == 2 and "--target pct://host" in res.stderr and len(res.stderr.splitlines()) == 1


def test_requirements_are_read_in_the_targets_folder_not_in_a_folder_of_that_name_here(infra: Infra, tmp_path):
    """--cwd names the folder on the target. A folder of the same name here is another machine's: its
    requirements.txt was checked against the container's python3 and failed the gate, while the container's own
    was never read. The target's files (and what they include) are read there; --requirements files here."""
    env = {"DFDOCTOR_SSH_CONFIG": str(infra.ssh_config)}
    there = infra.rootfs() / str(tmp_path).lstrip("/")
    there.mkdir(parents=True)
    try:
        (tmp_path / "requirements.txt").write_text("dfdoctor-no-such-distribution-here\n")
        res = run_dfdoctor("check", "--target", infra.pct_target, "--only", "deps.requirements", "--cwd",
                           str(tmp_path), "--format", "json", "--", "python3", "-c", "pass", cwd=tmp_path, env=env)
        rec = json.loads(res.stdout)["checks"][0]
        assert res.returncode == 0 and rec["status"] == "ok", rec
        assert f"no requirements file found in {tmp_path} on the target" in rec["summary"], rec
        (there / "requirements.txt").write_text("# the container's\n-r more.txt\n")
        (there / "more.txt").write_text("dfdoctor-missing-in-the-container>=1\n")
        res = run_dfdoctor("check", "--target", infra.pct_target, "--only", "deps.requirements", "--cwd",
                           str(tmp_path), "--format", "json", "--", "python3", "-c", "pass", cwd=tmp_path, env=env)
        rec = json.loads(res.stdout)["checks"][0]
        assert res.returncode == 1 and rec["cause"] == "dependency-missing", rec
        assert "dfdoctor-missing-in-the-container" in rec["summary"] and "more.txt:1" in rec["summary"], rec
        (there / "requirements.txt").unlink()
        (tmp_path / "extra.txt").write_text("dfdoctor-no-such-distribution-here\n")
        res = run_dfdoctor("check", "--target", infra.pct_target, "--only", "deps.requirements", "--cwd",
                           str(tmp_path), "--requirements", str(tmp_path / "extra.txt"), "--format", "json", "--",
                           "python3", "-c", "pass", cwd=tmp_path, env=env)
        rec = json.loads(res.stdout)["checks"][0]
        assert res.returncode == 1 and rec["cause"] == "dependency-missing", rec
        assert "extra.txt" in rec["summary"] and "requirements.txt" not in rec["summary"], rec
    finally:
        shutil.rmtree(there, ignore_errors=True)
