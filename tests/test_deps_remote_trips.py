"""deps.requirements on a --target reads the job's requirement files in the dependency probe's own round trip
(issue 45: the checked `launch --target pct://` spent one more round trip on them), through a real LXC container
behind `pct exec` over real ssh (tests/infra/provision.sh). The sessions are counted, each one still run."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from dfdoctor import Status, causes
from dfdoctor.checks.deps_requirements import deps_requirements
from dfdoctor.context import Context
from dfdoctor.targets import parse_target, remote_probe
from infra.fixtures import Infra, infra, ssh_config_env  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list:
    """The probe shipped in each session dfdoctor opens to the target (each one runs for real)."""
    seen: list = []
    real = remote_probe.request

    def counted(script, *args, **kwargs):
        seen.append(script.name)
        return real(script, *args, **kwargs)

    monkeypatch.setattr(remote_probe, "request", counted)
    return seen


@pytest.fixture
def folder(ssh_config_env: Infra):
    """A job's folder in the container (none of that name here)."""
    inside = f"/dfd-trips-{uuid.uuid4().hex[:8]}"
    there = ssh_config_env.rootfs() / inside.lstrip("/")
    there.mkdir(parents=True)
    yield inside, there
    shutil.rmtree(there, ignore_errors=True)


def _check(infra: Infra, inside: str) -> list:
    ctx = Context(python="python3", target=parse_target(infra.pct_target), cwd=Path(inside), timeout=30)
    return list(deps_requirements.run(ctx))


def test_a_folder_without_requirement_files_costs_one_round_trip(ssh_config_env: Infra, folder, sessions):
    inside, _ = folder
    (r,) = _check(ssh_config_env, inside)
    assert r.status is Status.OK and f"no requirements file found in {inside} on the target" in r.summary, r
    assert sessions == ["deps_probe.py"], sessions  # the files were looked for in its own round trip


def test_the_files_read_there_are_evaluated_there(ssh_config_env: Infra, folder, sessions):
    """What the files name is asked again, as a whole: the verdict is the one for the very list read there."""
    inside, there = folder
    (there / "requirements.txt").write_text("# the container's\n-r more.txt\n")
    (there / "more.txt").write_text("dfdoctor-missing-in-the-container>=1\n")
    found = _check(ssh_config_env, inside)
    fails = [r for r in found if r.status is Status.FAIL]
    assert [r.cause for r in fails] == [causes.DEPENDENCY_MISSING], found
    assert "dfdoctor-missing-in-the-container" in fails[0].summary and "more.txt:1" in fails[0].summary, fails
    # the files with the probe, the one they include, then the whole list asked
    assert sessions == ["deps_probe.py", "text_files_probe.py", "deps_probe.py"], sessions
