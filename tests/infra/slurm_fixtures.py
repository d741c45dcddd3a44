"""pytest fixtures for the real single-node Slurm that `tests/infra/slurm.sh` starts (slurmctld, slurmd,
munged, slurmdbd with MariaDB). Import into a test module with
`from infra.slurm_fixtures import slurm  # noqa: F401`.

Tests on the single-node cluster run side by side (several xdist workers, other sessions on this machine): each
holds the cluster shared for its duration (`slurm`), and the tests that take the node from the others (stop its
slurmd, fill all its CPUs, preempt a partition) hold it alone (`slurm_alone`, tests/test_slurm_alone.py): they
wait until no other test uses the cluster, and none starts until they are done. Provisioning runs under the same
lock, so a set-up never restarts the cluster under a test.

Where Slurm cannot start (not root, packages missing) the tests are skipped with the reason; with
DFDOCTOR_REQUIRE_INFRA=1 (CI) that is a failure, as for the sshd/LXC infrastructure."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

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


LOCK_WAIT_S = 900.0  # a test alone on the cluster takes under a minute; many may queue before it under load


def _flock(f, how: int, what: str) -> None:
    end = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(f, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > end:
                pytest.fail(f"the single-node Slurm stayed {what} for {LOCK_WAIT_S:.0f} s")
            time.sleep(0.1)


@contextlib.contextmanager
def _hold(alone: bool) -> Iterator[None]:
    """The cluster held shared, or alone: a readers-writer lock of two flocks. The gate, taken by everyone on the
    way in, keeps a test that waits to be alone from being starved by others that keep arriving."""
    base = Path(os.environ.get("DFDOCTOR_SLURM_DIR", "/var/lib/dfdoctor-slurm"))
    if os.geteuid() != 0:  # no cluster for this user (the fixture skips); nothing to lock
        yield
        return
    base.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{base}.gate", "a") as gate, open(f"{base}.users", "a") as users:
        _flock(gate, fcntl.LOCK_EX, "in another test's hands")
        try:
            _flock(users, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, "in use")
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(users, fcntl.LOCK_UN)


def _cluster() -> Slurm:
    got = _provision()
    if isinstance(got, str):
        if os.environ.get("DFDOCTOR_REQUIRE_INFRA") == "1":
            pytest.fail(f"Slurm required (DFDOCTOR_REQUIRE_INFRA=1) but unavailable: {got}")
        pytest.skip(f"Slurm unavailable: {got}")
    return got


@pytest.fixture
def slurm() -> Iterator[Slurm]:
    """Start (idempotently) and return the real single-node Slurm, shared with the tests that run beside."""
    with _hold(alone=False):
        yield _cluster()


@pytest.fixture(scope="module")
def slurm_alone() -> Iterator[Slurm]:
    """The real single-node Slurm, with no other test on it: for tests that take the node from the others. Held
    for their whole module (tests/test_slurm_alone.py), so the tests beside wait for one drain, not one a test."""
    with _hold(alone=True):
        yield _cluster()


PAIR_SCRIPT = Path(__file__).resolve().parent / "slurm_pair.sh"


@dataclass(frozen=True)
class SlurmPair:
    """The two-node cluster slurm_pair.sh started (nodes n1, n2 on this host, each in a network namespace of its
    own), reached through SLURM_CONF."""

    dir: Path
    conf: Path
    nodes: tuple[str, ...]
    addrs: tuple[str, ...]  # each node's address (its NodeAddr), in the order of `nodes`
    partition: str
    small_shm_node: str  # the node whose /dev/shm is a 64 MiB tmpfs of its own

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment, pointed at the pair's slurm.conf (and no allocation of the other cluster)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, "SLURM_CONF": str(self.conf), **extra}

    def quirk(self, node: str, **exports: str) -> None:
        """Make one node differ: its tasks get these variables (the TaskProlog reads quirks/NODE.env)."""
        (self.dir / "quirks" / f"{node}.env").write_text("".join(f"export {k}={v}\n" for k, v in exports.items()))

    def clear_quirks(self) -> None:
        for f in (self.dir / "quirks").glob("*.env"):
            f.unlink()

    def cut(self, node: str, other: str, how: str = "drop") -> None:
        """Make `node` unable to reach `other` except `other`'s slurmd port: its packets are dropped, or rejected
        (ICMP admin-prohibited) with how="reject"; `mend` undoes it. The fixture mends after each test, also after
        one that failed."""
        subprocess.run(["bash", str(PAIR_SCRIPT), "cut", node, other, how], check=True, timeout=30,
                       capture_output=True)

    def mend(self) -> None:
        subprocess.run(["bash", str(PAIR_SCRIPT), "mend"], check=True, timeout=30, capture_output=True)


@functools.lru_cache(maxsize=None)
def _provision_pair() -> Union[SlurmPair, str]:
    # Not slurm.sh: it restarts the single-node cluster when its node is down, which test_node_failure does on
    # purpose in another worker. slurm_pair.sh starts the one munged both share if it is not running.
    v = run_provisioning(PAIR_SCRIPT, "two slurmd daemons in their own mount namespaces")
    if isinstance(v, str):
        return v
    return SlurmPair(Path(v["DFDOCTOR_SLURM_PAIR_DIR"]), Path(v["DFDOCTOR_SLURM_PAIR_CONF"]),
                     tuple(v["DFDOCTOR_SLURM_PAIR_NODES"].split(",")), tuple(v["DFDOCTOR_SLURM_PAIR_ADDRS"].split(",")),
                     v["DFDOCTOR_SLURM_PAIR_PARTITION"],
                     v["DFDOCTOR_SLURM_PAIR_SMALL_SHM_NODE"])


@pytest.fixture
def slurm_pair() -> Iterator[SlurmPair]:
    """Start (idempotently) and return the real two-node Slurm; each test starts with no node quirk and no cut."""
    got = _provision_pair()
    if isinstance(got, str):
        if os.environ.get("DFDOCTOR_REQUIRE_INFRA") == "1":
            pytest.fail(f"the two-node Slurm required (DFDOCTOR_REQUIRE_INFRA=1) but unavailable: {got}")
        pytest.skip(f"the two-node Slurm unavailable: {got}")
    got.clear_quirks()
    got.mend()
    try:
        yield got
    finally:
        got.mend()
        got.clear_quirks()
