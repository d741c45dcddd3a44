"""What a process's main thread waits for in the kernel: the system call it sleeps in and on what.

Why the kernel too: py-spy shows Python frames, and a C function called from Python (`time.sleep`, `input`,
`fcntl.flock`, a socket's `recv`) shows only as the user's own calling line. /proc/PID/syscall names the call
and its arguments, /proc/PID/fd names the file, pipe or socket behind a descriptor, /proc/locks names who holds
a lock, and the socket's peer names the host at the other end. All of it is read without stopping the process.
"""

from __future__ import annotations

import os
import platform
import struct
from dataclasses import dataclass
from typing import Optional

import psutil

from dfdoctor.agent.procfs import settled_syscall

# System call numbers that mean "waiting", per architecture (asm/unistd_64.h; the generic table on arm64).
_X86_64 = {0: "read", 7: "poll", 17: "pread64", 19: "readv", 23: "select", 35: "nanosleep", 43: "accept",
           45: "recvfrom", 47: "recvmsg", 61: "wait4", 72: "fcntl", 73: "flock", 202: "futex", 230: "clock_nanosleep",
           232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4",
           219: "restart_syscall"}
_AARCH64 = {63: "read", 73: "ppoll", 67: "pread64", 65: "readv", 101: "nanosleep", 202: "accept", 242: "accept4",
            207: "recvfrom", 212: "recvmsg", 260: "wait4", 25: "fcntl", 32: "flock", 98: "futex",
            115: "clock_nanosleep", 22: "epoll_pwait", 95: "waitid", 72: "pselect6", 128: "restart_syscall"}
SYSCALLS = _AARCH64 if platform.machine() in ("aarch64", "arm64") else _X86_64
READS = {"read", "pread64", "readv", "recvfrom", "recvmsg"}
POLLS = {"poll", "ppoll"}
SELECTS = {"select", "pselect6"}  # wget and older tools wait on a socket in these
SLEEPS = {"nanosleep", "clock_nanosleep"}
F_SETLKW, F_OFD_SETLKW = 7, 38


@dataclass(frozen=True)
class KernelWait:
    """The system call a thread sleeps in, the descriptor it waits on and what is behind it."""

    syscall: str  # "read", "flock", ... or "running" / "unknown"
    fd: Optional[int] = None
    target: Optional[str] = None  # /proc/PID/fd/N: a path, "pipe:[...]", "socket:[...]", /dev/pts/N
    holder: Optional[int] = None  # the pid holding the lock it waits for
    peer: Optional[str] = None  # host:port at the other end of its socket
    listening: Optional[str] = None  # host:port its socket listens on: a server waiting for a client, no download

    @property
    def is_socket(self) -> bool:
        return bool(self.target and self.target.startswith("socket:"))

    def words(self) -> str:
        """`read(fd 0 -> pipe:[123])`, as an evidence line says it."""
        on = f"fd {self.fd} -> {self.target}" if self.fd is not None else ""
        extra = f", peer {self.peer}" if self.peer else f", listening on {self.listening}" if self.listening else ""
        extra += f", lock held by pid {self.holder}" if self.holder else ""
        return f"{self.syscall}({on}{extra})"


def _fd_target(pid: int, fd: int) -> Optional[str]:
    """What descriptor fd of pid points at."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None


def _select_fd(pid: int, nfds: int, pointer: int) -> Optional[int]:
    """The lowest descriptor in a select() set (an fd_set bitmap of nfds bits, read from the process's memory);
    None for an empty set (select used as a sleep) or one that cannot be read."""
    if not pointer or not 0 < nfds <= 1024:
        return None
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(pointer)
            bits = mem.read((nfds + 7) // 8)
    except (OSError, ValueError, OverflowError):
        return None
    return next((i * 8 + b for i, byte in enumerate(bits) for b in range(8) if byte >> b & 1 and i * 8 + b < nfds),
                None)


def _poll_fds(pid: int, pointer: int, count: int) -> list[int]:
    """The descriptors of a poll() call, read from the process's memory (struct pollfd: int fd; short; short)."""
    if not pointer or not 0 < count <= 16:
        return []
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(pointer)
            raw = mem.read(8 * count)
    except (OSError, ValueError, OverflowError):
        return []
    return [struct.unpack_from("i", raw, 8 * i)[0] for i in range(len(raw) // 8)]


def lock_holder(path_target: Optional[str], waiter: int) -> Optional[int]:
    """The pid /proc/locks names as holding a lock on the file (not the waiter, not a blocked request)."""
    if not path_target or not path_target.startswith("/"):
        return None
    try:
        st = os.stat(path_target)
        text = open("/proc/locks").read()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] == "->":  # "->" marks a request that is itself blocked
            continue
        try:
            pid, dev_ino = int(parts[4]), parts[5].split(":")
            if int(dev_ino[2]) == st.st_ino and pid != waiter:
                return pid
        except (ValueError, IndexError):
            continue
    return None


def _peer(pid: int, fd: int) -> Optional[str]:
    """The remote address of a connected socket, host:port."""
    return _socket_ends(pid, fd)[0]


def _socket_ends(pid: int, fd: int) -> tuple[Optional[str], Optional[str]]:
    """(the remote address of a connected socket, the local address of a listening one), host:port each."""
    try:
        for c in psutil.Process(pid).net_connections(kind="inet"):
            if c.fd == fd and c.raddr:
                return f"{c.raddr.ip}:{c.raddr.port}", None
            if c.fd == fd and c.status == psutil.CONN_LISTEN and c.laddr:
                return None, f"{c.laddr.ip}:{c.laddr.port}"
    except (psutil.Error, AttributeError):
        pass
    return None, None


def kernel_wait(pid: int) -> KernelWait:
    """The main thread's system call now (the main thread's task id is the pid)."""
    text = settled_syscall(pid)  # read again while "running": see agent/procfs.py
    if text is None:
        return KernelWait("unknown")
    fields = text.split()
    if not fields or fields[0] == "running":
        return KernelWait("running")
    try:
        nr, args = int(fields[0]), [int(a, 16) for a in fields[1:7]]
    except ValueError:
        return KernelWait("unknown")
    name = SYSCALLS.get(nr, f"syscall {nr}")
    fd: Optional[int] = None
    if name in READS or name in ("flock", "fcntl", "accept", "accept4"):
        fd = args[0]
    elif name in POLLS:
        fds = [f for f in _poll_fds(pid, args[0], args[1]) if f >= 0]
        fd = fds[0] if fds else None
    elif name in SELECTS:
        fd = _select_fd(pid, args[0], args[1]) or _select_fd(pid, args[0], args[2])  # read set, else write set
    if name == "fcntl" and args[1] not in (F_SETLKW, F_OFD_SETLKW):
        fd = None
    target = _fd_target(pid, fd) if fd is not None and fd < 1 << 20 else None
    holder = lock_holder(target, pid) if name in ("flock", "fcntl") else None
    peer, listening = _socket_ends(pid, fd) if target and target.startswith("socket:") else (None, None)
    return KernelWait(name, fd, target, holder, peer, listening)


def from_raw(syscall: str, fds: dict, locks: str) -> KernelWait:
    """The same reading from what a target's agent sent back: /proc/PID/syscall's text, {fd: [link, inode,
    socket peer, address listened on]} for the descriptors it read (with "poll": [fds] for a poll; the peer from the target's own
    socket tables, by doctor/agent/waits.py), and /proc/locks there."""
    fields = syscall.split()
    if not fields or fields[0] == "running":
        return KernelWait("running" if fields else "unknown")
    try:
        nr, args = int(fields[0]), [int(a, 16) for a in fields[1:7]]
    except ValueError:
        return KernelWait("unknown")
    name = SYSCALLS.get(nr, f"syscall {nr}")
    fd = args[0] if name in READS or name in ("flock", "fcntl", "accept", "accept4") else None
    if name in POLLS:
        fd = next((f for f in fds.get("poll") or [] if isinstance(f, int) and f >= 0), None)
    if name == "fcntl" and args[1] not in (F_SETLKW, F_OFD_SETLKW):
        fd = None
    entry = list(fds.get(str(fd)) or []) if fd is not None else []
    link, inode, peer, listening = (entry + [None, None, None, None])[:4]
    holder = None
    if name in ("flock", "fcntl") and inode:
        for line in locks.splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[1] != "->" and parts[5].split(":")[-1] == str(inode):
                holder = int(parts[4]) if parts[4].isdigit() else None
                break
    on_socket = bool(link and str(link).startswith("socket:"))
    return KernelWait(name, fd, link, holder, peer if on_socket else None, listening if on_socket else None)
