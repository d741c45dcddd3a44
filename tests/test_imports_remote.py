"""imports.smoke and deps.requirements where the job runs elsewhere: a real LXC container behind `pct exec`
over real ssh (tests/infra/provision.sh). The script exists only in the container; the probes travel there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dfdoctor.checks.deps_requirements import deps_requirements
from dfdoctor.checks.imports_smoke import imports_smoke
from dfdoctor import Status, causes
from dfdoctor.context import Context
from dfdoctor.targets import parse_target
from infra.fixtures import Infra, infra, ssh_config_env  # noqa: F401

SAMPLES = Path(__file__).resolve().parent / "samples"
pytestmark = pytest.mark.slow


def worst(results):
    return max(results, key=lambda r: r.status.rank)


@pytest.fixture
def remote_project(ssh_config_env: Infra):
    """Copy a sample into the container's /root (not present on this machine at that path)."""
    made = []

    def put(name: str) -> Path:
        inside = Path("/root/dfdoctor-samples") / name
        host = ssh_config_env.rootfs() / inside.relative_to("/")
        if host.exists():
            shutil.rmtree(host)
        shutil.copytree(SAMPLES / name, host)
        made.append(host)
        return inside

    yield put
    for host in made:
        shutil.rmtree(host, ignore_errors=True)


def test_missing_module_found_in_the_container(ssh_config_env, remote_project) -> None:
    proj = remote_project("missing_module")
    assert not proj.exists()  # only the container has it
    ctx = Context(command=["python3", "train.py"], cwd=proj, python="python3", target=parse_target(ssh_config_env.pct_target),
                  timeout=30)
    r = worst(imports_smoke.run(ctx))
    assert (r.status, r.cause) == (Status.FAIL, causes.MISSING_MODULE), r
    assert "dflash_block_kernels_not_installed" in r.summary and f"{proj / 'train.py'}:3" in r.summary


def test_script_missing_in_the_container_is_command_not_found(ssh_config_env, remote_project) -> None:
    proj = remote_project("missing_module")
    ctx = Context(command=["python3", "trian.py"], cwd=proj, python="python3", target=parse_target(ssh_config_env.pct_target),
                  timeout=30)
    r = worst(imports_smoke.run(ctx))
    assert (r.status, r.cause) == (Status.FAIL, causes.COMMAND_NOT_FOUND)
    assert "trian.py" in r.summary


def test_deps_scan_runs_in_the_containers_python(ssh_config_env, tmp_path) -> None:
    # given with --requirements (a file of this machine's): the folder of --cwd is the container's
    (tmp_path / "requirements.txt").write_text("dflash-kernels-not-installed>=1\n")
    ctx = Context(command=["python3", "train.py"], cwd=tmp_path, python="python3", target=parse_target(ssh_config_env.pct_target),
                  requirements=[str(tmp_path / "requirements.txt")], timeout=30)
    results = deps_requirements.run(ctx)
    r = worst(results)
    if r.status is Status.SKIP:  # the container's python is older than 3.8: said, not guessed
        assert "3.8" in r.summary
        return
    assert r.cause == causes.DEPENDENCY_MISSING and "dflash-kernels-not-installed" in r.summary
    assert "/work/" not in r.data["python"]  # the container's interpreter, not this machine's
