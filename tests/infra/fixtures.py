"""pytest fixtures for the real target infrastructure that `tests/infra/provision.sh` sets up (sshd on 127.0.0.1,
LXC containers, the `pct` shim, the kill-everything key). Import them into a test module with
`from tests.infra.fixtures import infra  # noqa: F401`.

Where the infrastructure cannot start (not root, packages missing, no LXC support) the tests are skipped with
the reason printed (`-ra`); with DFDOCTOR_REQUIRE_INFRA=1 (CI) that is a failure instead, never a silent pass.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

import pytest

HERE = Path(__file__).resolve().parent
PROVISION = HERE / "provision.sh"


@dataclass(frozen=True)
class Infra:
    """What provision.sh set up, and helpers to reach it the way a user would."""

    dir: Path
    port: int
    vmid: str
    vmid_pty1: str
    ssh_config: Path
    docker_name: str = ""  # the docker container, when a docker engine could run here
    docker_problem: str = ""  # why not, otherwise

    @property
    def docker_target(self) -> str:
        """`--target` for the docker container."""
        return f"docker://{self.docker_name}"

    @property
    def docker_workspace(self) -> Path:
        """The host folder mounted at /workspace in the docker container."""
        return self.dir / "docker-workspace"

    @property
    def ssh_target(self) -> str:
        """`--target` for the ssh server."""
        return f"ssh://root@127.0.0.1:{self.port}"

    @property
    def pct_target(self) -> str:
        """`--target` for the container behind `pct exec`."""
        return f"pct://root@127.0.0.1:{self.port}/{self.vmid}"

    def ssh_argv(self, *, tty: int = 0, host: str = "dfdoctor-host") -> list[str]:
        """A user's `ssh [-t|-tt] root@host` with this infrastructure's keys."""
        return ["ssh", "-F", str(self.ssh_config), *(["-" + "t" * tty] if tty else []), host]

    def ssh(self, remote: str, *, tty: int = 0, timeout: float = 30, host: str = "dfdoctor-host",
            env: Optional[dict] = None) -> subprocess.CompletedProcess:
        """Run one remote command line exactly as `ssh root@HOST 'LINE'` would."""
        argv = self.ssh_argv(tty=tty, host=host) + [remote]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env=env)

    def container(self, script: str, *, vmid: Optional[str] = None, timeout: float = 15) -> subprocess.CompletedProcess:
        """Run a shell script inside the container directly (lxc-attach on this machine), for test bookkeeping."""
        return subprocess.run(["lxc-attach", "-n", vmid or self.vmid, "--", "/bin/sh", "-c", script],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def rootfs(self, vmid: Optional[str] = None) -> Path:
        """The container's root file system as seen from the host."""
        return Path("/var/lib/lxc") / (vmid or self.vmid) / "rootfs"

    def env(self) -> dict[str, str]:
        """The environment under which dfdoctor finds this infrastructure's ssh_config."""
        return dict(os.environ, DFDOCTOR_SSH_CONFIG=str(self.ssh_config))

    def slow_ssh_config(self, folder: Path, seconds: float) -> Path:
        """An ssh_config in `folder` whose host `slow-host` is this sshd, reached `seconds` late (a loaded machine
        or a far host, made exact by tests/support/slow_proxy.py)."""
        proxy = HERE.parent / "support" / "slow_proxy.py"
        config = folder / "ssh_config"
        config.write_text(f"Host slow-host\n  HostName 127.0.0.1\n  Port {self.port}\n"
                          f"  ProxyCommand {sys.executable} {proxy} {seconds:g} %h %p\n"
                          f"  HostKeyAlias [127.0.0.1]:{self.port}\n" + self.ssh_config.read_text()
                          .replace("Host 127.0.0.1 localhost", "Host 127.0.0.1 localhost slow-host"))
        return config


def _unavailable(reason: str):
    """Skip (or, with DFDOCTOR_REQUIRE_INFRA=1, fail) with the reason printed."""
    if os.environ.get("DFDOCTOR_REQUIRE_INFRA") == "1":
        pytest.fail(f"target infrastructure required (DFDOCTOR_REQUIRE_INFRA=1) but unavailable: {reason}")
    pytest.skip(f"target infrastructure unavailable: {reason}")


def run_provisioning(script: Path, needs: str) -> Union[dict[str, str], str]:
    """Run a provisioning script as root; the KEY=VALUE file named on its last line of output, or why it failed."""
    if os.geteuid() != 0:
        return f"needs root ({needs})"
    try:
        p = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=180,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{script.name} did not finish: {exc}"
    if p.returncode != 0:
        return f"{script.name} failed: {(p.stderr or p.stdout).strip()[-400:]}"
    env_file = Path(p.stdout.strip().splitlines()[-1])
    return dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)


@functools.lru_cache(maxsize=None)
def _provision() -> Union[Infra, str]:
    """Provision once per test session: the Infra, or why it is unavailable.

    Every test module imports the `infra` fixture, which makes one session fixture per module; the cache keeps a
    failed provisioning from being retried (and waited on) eight times."""
    values = run_provisioning(PROVISION, "sshd on a high port, LXC containers")
    if isinstance(values, str):
        return values
    return Infra(dir=Path(values["DFDOCTOR_INFRA_DIR"]), port=int(values["DFDOCTOR_INFRA_SSH_PORT"]),
                 vmid=values["DFDOCTOR_INFRA_VMID"], vmid_pty1=values["DFDOCTOR_INFRA_VMID_PTY1"],
                 ssh_config=Path(values["DFDOCTOR_SSH_CONFIG"]),
                 docker_name=values.get("DFDOCTOR_INFRA_DOCKER_NAME", ""),
                 docker_problem=values.get("DFDOCTOR_INFRA_DOCKER_PROBLEM", ""))


@pytest.fixture(scope="session")
def infra() -> Infra:
    """Provision (idempotently) and return the real sshd + LXC + pct infrastructure."""
    provisioned = _provision()
    if isinstance(provisioned, str):
        _unavailable(provisioned)
    return provisioned


@pytest.fixture
def docker_infra(infra: Infra) -> Infra:
    """The infrastructure with its docker container. Where no docker engine could run, skipped with the reason
    printed; a failure instead under DFDOCTOR_REQUIRE_DOCKER=1, which .ci/run sets once the engine has answered
    (a machine that cannot run dockerd at all still runs every other infrastructure test)."""
    if not infra.docker_name:
        reason = f"no docker container: {infra.docker_problem or 'not provisioned'}"
        if os.environ.get("DFDOCTOR_REQUIRE_DOCKER") == "1":
            pytest.fail(f"docker required (DFDOCTOR_REQUIRE_DOCKER=1) but unavailable: {reason}")
        pytest.skip(reason)
    return infra


@pytest.fixture
def ssh_config_env(infra: Infra, monkeypatch: pytest.MonkeyPatch) -> Infra:
    """Point dfdoctor's ssh at the infrastructure's ssh_config for one test."""
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.ssh_config))
    return infra


def growing(path: Path, wait: float = 0.8) -> bool:
    """Whether a log file exists and is still growing (it grows within `wait` seconds)."""
    import time

    if not path.exists():
        return False
    first = path.stat().st_size
    time.sleep(wait)
    return path.stat().st_size > first


def procs_naming(mark: str) -> list:
    """Processes whose command line names `mark`: a container shares this kernel, so its jobs are seen here."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(mark in a for a in p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


def kill_naming(mark: str) -> list:
    """Kill every process whose command line names `mark`; what still runs afterwards (should be nothing).
    A container's processes are reaped by its own init, not by us: wait for them."""
    import psutil

    procs = procs_naming(mark)
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)
    return [p for p in procs_naming(mark) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@dataclass(frozen=True)
class ContainerFolder:
    """A fresh folder in container 200 for one test, and what dfdoctor needs beside it."""

    name: str  # hostile on purpose: what the test wants quoted right
    inside: str  # its path inside the container
    host_side: Path  # the same folder seen from the host
    local: Path  # a local folder to run dfdoctor in
    env: dict  # infra's environment with a private cache, so `--strategy auto` sees no other test's strategy


@contextmanager
def folder_in_container(infra: Infra, tmp_path: Path, hostile: str) -> Iterator[ContainerFolder]:
    """A folder named `hostile` plus a unique tail; afterwards every process naming that tail is killed, and
    none may still run (a dfdoctor that leaves a job or recorder behind fails the test)."""
    tail = uuid.uuid4().hex[:8]  # a process may name the folder quoted or escaped; the tail it names as-is
    name = f"{hostile}{tail}"
    host_side = infra.rootfs() / "tmp" / name
    host_side.mkdir()
    local = tmp_path / "here"
    local.mkdir()
    try:
        yield ContainerFolder(name, f"/tmp/{name}", host_side, local,
                              dict(infra.env(), XDG_CACHE_HOME=str(tmp_path / "cache")))
        left = kill_naming(tail)
        assert not left, f"left behind in the container: {left}"
    finally:
        kill_naming(tail)
        shutil.rmtree(host_side, ignore_errors=True)


def q(s: str) -> str:
    """Shell-quote one word."""
    return shlex.quote(s)
