"""pytest fixtures for the real single-node Slurm that `tests/infra/slurm.sh` starts (slurmctld, slurmd,
munged, slurmdbd with MariaDB). Import into a test module with
`from infra.slurm_fixtures import slurm  # noqa: F401`.

Where Slurm cannot start (not root, packages missing) the tests are skipped with the reason; with
DFDOCTOR_REQUIRE_INFRA=1 (CI) that is a failure, as for the sshd/LXC infrastructure."""

from __future__ import annotations

import functools
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import pytest
from infra.fixtures import run_provisioning

SCRIPT = Path(__file__).resolve().parent / "slurm.sh"


@dataclass(frozen=True)
class Slurm:
    """The cluster slurm.sh started."""

    dir: Path
    node: str
    cpus: int
    partition: str
    urgent: str  # a partition whose jobs preempt `partition`'s

    def sbatch(self, *args: str, cwd: Path, env: dict | None = None) -> str:
        """Submit directly (not through dfdoctor); the job id."""
        p = subprocess.run(["sbatch", "--parsable", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                           env=env)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip().split(";")[0]

    def state(self, job_id: str) -> str:
        p = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30)
        for w in p.stdout.split():
            if w.startswith("JobState="):
                return w.split("=", 1)[1]
        return ""

    def wait_state(self, job_id: str, states: tuple[str, ...], timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.state(job_id)
            if s in states:
                return s
            time.sleep(0.2)
        return self.state(job_id)

    def cancel(self, *job_ids: str) -> None:
        subprocess.run(["scancel", *job_ids], capture_output=True, timeout=30)

    def field(self, job_id: str, name: str) -> str:
        p = subprocess.run(["scontrol", "-d", "-o", "show", "job", job_id], capture_output=True, text=True,
                           timeout=30)
        for w in p.stdout.split():
            if w.startswith(name + "="):
                return w.split("=", 1)[1]
        return ""


@functools.lru_cache(maxsize=None)
def _provision() -> Union[Slurm, str]:
    v = run_provisioning(SCRIPT, "munged, slurmd and MariaDB run as daemons here")
    if isinstance(v, str):
        return v
    return Slurm(Path(v["DFDOCTOR_SLURM_DIR"]), v["DFDOCTOR_SLURM_NODE"], int(v["DFDOCTOR_SLURM_CPUS"]),
                 v["DFDOCTOR_SLURM_PARTITION"], v["DFDOCTOR_SLURM_URGENT"])


@pytest.fixture(scope="session")
def slurm() -> Slurm:
    """Start (idempotently) and return the real single-node Slurm."""
    got = _provision()
    if isinstance(got, str):
        if os.environ.get("DFDOCTOR_REQUIRE_INFRA") == "1":
            pytest.fail(f"Slurm required (DFDOCTOR_REQUIRE_INFRA=1) but unavailable: {got}")
        pytest.skip(f"Slurm unavailable: {got}")
    return got
