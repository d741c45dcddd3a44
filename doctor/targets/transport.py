"""Run an argv on a target, exactly: `wrap`, `shell`, `transport_error`, `connected` and `typed_line` ask the
target's kind (`targets/kinds/`); this module also holds the OpenSSH machinery ssh:// and pct:// share (the
options, and the shared connection, ControlMaster, that `ssh_master` opens and closes when its block ends;
without it each call connects afresh).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator, Optional, Sequence

from dfdoctor.agent.procfs import proc_state
from dfdoctor.shellquote import quote  # noqa: F401  (tests quote with it)
from dfdoctor.targets import master_watch
from dfdoctor.targets.target import Target

CONNECT_TIMEOUT_S = 8
# The test infrastructure (and users who want one) point dfdoctor at an ssh_config of their own.
SSH_CONFIG_ENV = "DFDOCTOR_SSH_CONFIG"
SHARED_ENV = "DFDOCTOR_SSH_SHARED"  # the folder of this run's ControlMaster sockets, set by connected()


def control_path(target: Target) -> Optional[str]:
    """This dfdoctor run's socket for `target`, while `connected()` holds one; else None.

    The folder is per run (named in the environment, so forked check workers and their children find it):
    two dfdoctor runs never share, or close, each other's connection.
    """
    shared = os.environ.get(SHARED_ENV)
    if not shared:
        return None
    import hashlib  # here: a local check or report never gets this far, and does not load OpenSSL for it
    key = f"{target.destination}:{target.port or ''}:{os.environ.get(SSH_CONFIG_ENV, '')}:{target.part('ssh_options') or ''}"
    return os.path.join(shared, hashlib.sha1(key.encode()).hexdigest()[:16])


def ssh_options(target: Target, *, master: str = "no") -> list[str]:
    """The options every dfdoctor connection uses (config file, BatchMode, timeouts, the shared socket)."""
    argv = []
    cfg = os.environ.get(SSH_CONFIG_ENV)
    if cfg:
        argv += ["-F", cfg]
    # ControlMaster=no even without a socket of ours: a user's `ControlPersist` must not turn one of our
    # commands into a master that outlives dfdoctor.
    # PermitLocalCommand=no: a LocalCommand in the user's ssh_config (or a line's -F file) runs on this machine at
    # every login; none of dfdoctor's connections may run one (a command line's -o beats every config file)
    argv += ["-o", "PermitLocalCommand=no", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
             "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", f"ControlMaster={master}"]
    path = control_path(target)
    if path:
        argv += ["-o", f"ControlPath={path}"]
    # the user's own hop options (`-F FILE -i KEY -J JUMP -o K=V`): after dfdoctor's, which ssh takes first for
    # each -o; the user's -F, given last, is the one ssh reads
    words = target.part("ssh_options")
    argv += shlex.split(words) if words else []
    if target.port:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    return argv


def ssh_base(target: Target, *, tty: bool = False) -> list[str]:
    """`ssh` with dfdoctor's options, up to and including the destination."""
    return ["ssh", *ssh_options(target), "-tt" if tty else "-T", "--", target.host or ""]


def wrap(target: Target, argv: Sequence[str], *, tty: bool = False) -> list[str]:
    """The local argv that runs `argv` on the target with every word intact (the kind's class says how)."""
    return target.kind_class.wrap(target, argv, tty=tty)


def shell(target: Target, script: str, *, tty: bool = False) -> list[str]:
    """The local argv that runs a POSIX shell script on the target (in the container for pct/lxc/docker)."""
    return wrap(target, ["sh", "-c", script], tty=tty)


def transport_error(target: Target, returncode: Optional[int], stderr: str) -> Optional[str]:
    """The transport's own words when reaching the target failed (ssh's exit 255, lxc-attach or the docker
    client complaining), else None: a failure of the command itself is not the transport's."""
    return target.kind_class.transport_error(target, returncode, stderr)


def connected(target: Target) -> contextlib.AbstractContextManager[Optional[str]]:
    """Share one connection between every step inside the block (ssh's ControlMaster for ssh:// and pct://;
    nothing for the others); it yields the error words if it cannot connect, and is closed on the way out."""
    return target.kind_class.connected(target)


@contextlib.contextmanager
def ssh_master(target: Target, timeout: float = CONNECT_TIMEOUT_S + 4) -> Iterator[Optional[str]]:
    """Share one ssh connection between every step inside the block; yields ssh's error if it cannot connect.

    The master is closed on the way out (and killed if it does not go), so no ssh process outlives dfdoctor;
    should dfdoctor be killed (SIGKILL) inside the block, its watchman ends the master (`master_watch`).
    A block inside another one for the same run reuses the outer connection.
    """
    opened_dir = None
    if not os.environ.get(SHARED_ENV):
        opened_dir = tempfile.mkdtemp(prefix="dfdoctor-ssh-")
        os.environ[SHARED_ENV] = opened_dir
    path = control_path(target)
    if path and os.path.exists(path) and opened_dir is None:
        yield None  # the outer block's master serves
        return
    start = ["ssh", *ssh_options(target, master="yes"), "-o", "ControlPersist=yes", "-N", "-f", "--",
             target.host or ""]
    err = None
    try:
        p = subprocess.run(start, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=timeout, text=True)
        if p.returncode != 0:
            err = transport_error(target, 255, p.stderr) or p.stderr.strip()
    except subprocess.TimeoutExpired:
        err = f"ssh did not connect within {timeout:.0f} s"
    master = _master_pid(target)
    watchman = master_watch.watch(master, opened_dir) if master else None  # ends it should dfdoctor be killed
    try:
        yield err
    finally:
        close(target, master)
        master_watch.release(watchman)
        if opened_dir:
            os.environ.pop(SHARED_ENV, None)
            shutil.rmtree(opened_dir, ignore_errors=True)


def _master_pid(target: Target) -> Optional[int]:
    """The pid of this run's master for `target` (`ssh -O check` says it), if one runs."""
    try:
        p = subprocess.run(["ssh", *ssh_options(target), "-O", "check", "--", target.host or ""],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=5)
    except (subprocess.TimeoutExpired, OSError):
        return None
    m = re.search(r"pid=(\d+)", p.stderr + p.stdout)
    return int(m.group(1)) if m else None


def close(target: Target, master: Optional[int] = None) -> None:
    """Ask this run's master for `target` to exit; kill it if it is still there a moment later."""
    if control_path(target) is None:
        return
    try:
        subprocess.run(["ssh", *ssh_options(target), "-O", "exit", "--", target.host or ""], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5)
    except (subprocess.TimeoutExpired, OSError):
        pass
    if master is None:
        return
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        if not _alive(master):
            return
        time.sleep(0.02)
    try:
        os.kill(master, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    """Whether `pid` still runs. A master that exited stays a zombie until init reaps it (some inits take a
    second or more), and kill(pid, 0) succeeds on a zombie: read the state instead."""
    if not os.path.isdir("/proc/self"):  # no procfs: the zombie case cannot be told apart
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return proc_state(pid) not in (None, "Z")


def typed_line(target: Target, script: str) -> str:
    """The line a person types to run a shell script on the target (for fixes to copy)."""
    return target.kind_class.typed_line(target, script)
