"""On a target, beside `target_agent.py` (standard library, Python 3.6+): the descriptors a waiting main thread
names, and for a socket the host:port at its other end, from the target's own /proc (dfdoctor.diagnose.kernelwait
reads the same here with psutil, which the target may not have).

A poll() names its descriptors only in the process's memory (struct pollfd: int fd; short; short), read from
/proc/PID/mem as the local reading does; a socket's peer is the row of /proc/PID/net/tcp (or tcp6, the
process's own network namespace: a container's) whose inode is the socket's.
"""

import os
import platform
import socket
import struct

_POLLS = {"x86_64": (7, 271), "aarch64": (73,), "arm64": (73,)}  # poll, ppoll (asm/unistd_64.h; generic table)
_LISTEN = "0A"
# /proc/net/tcp's state column (include/net/tcp_states.h), in psutil's words: the local reading's
_TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
               "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN",
               "0B": "CLOSING"}
MAX_CONNECTIONS = 64  # of one process, sent back (a rank's store and peers; NCCL's many sockets are not needed)


def _poll_fds(pid, pointer, count):
    """The descriptors of a poll() call, read from the process's memory."""
    if not pointer or not 0 < count <= 16:
        return []
    try:
        with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
            mem.seek(pointer)
            raw = mem.read(8 * count)
    except (OSError, ValueError, OverflowError):
        return []
    return [f for f in (struct.unpack_from("i", raw, 8 * i)[0] for i in range(len(raw) // 8)) if f >= 0]


def _address(hex_addr):
    """/proc/net/tcp's `0100007F:1F90` (or an IPv6 one) as `127.0.0.1:8080`."""
    host, _, port = hex_addr.partition(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four 32-bit words, each in host (little-endian) order
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
        if ip.startswith("::ffff:") and "." in ip:
            ip = ip[len("::ffff:"):]
    return "%s:%d" % (ip, int(port, 16))


def socket_peer(pid, inode):
    """host:port at the other end of the connected TCP socket with this inode, or None."""
    return _socket_ends(pid, inode)[0]


def _socket_ends(pid, inode):
    """(host:port at the other end of the connected TCP socket with this inode, host:port it listens on when it
    is a listening one): a server in accept() waits for a client, nothing is downloaded."""
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[9] == str(inode):
                try:
                    return (None, _address(cols[1])) if cols[3] == _LISTEN else (_address(cols[2]), None)
                except ValueError:
                    return None, None
    return None, None


def tcp_connections(pid, tables):
    """[[host:port at the other end, state], ...] of the process's TCP sockets that have another end (a listening
    one has none), read from its descriptors and its own network namespace's tables: what psutil's
    net_connections gives a local look (dfdoctor.diagnose.jobstacks reads both alike). None when its
    descriptors cannot be read (another user's process, one that is gone). `tables`: the rows read so far, by
    network namespace (the kernel writes a busy host's table out in milliseconds: once a look is enough)."""
    try:
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue  # closed while listed
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    except OSError:
        return None
    out = []
    for cols in _tcp_rows(pid, tables) if inodes else ():
        if cols[9] in inodes and cols[3] != _LISTEN and len(out) < MAX_CONNECTIONS:
            try:
                out.append([_address(cols[2]), _TCP_STATES.get(cols[3], cols[3])])
            except ValueError:
                continue
    return out


def _tcp_rows(pid, tables):
    """The rows of the process's network namespace's tcp and tcp6 tables, split, read once per namespace."""
    try:
        netns = os.readlink("/proc/%d/ns/net" % pid)
    except OSError:
        netns = "pid %d" % pid  # not shared with any other: read its own
    if netns not in tables:
        rows = []
        for table in ("tcp", "tcp6"):
            try:
                with open("/proc/%d/net/%s" % (pid, table)) as f:
                    rows += [cols for cols in (row.split() for row in f.read().splitlines()[1:]) if len(cols) > 9]
            except OSError:
                continue
        tables[netns] = rows
    return tables[netns]


def wait_fds(pid, syscall):
    """{fd: [what it points at, its inode, its socket peer or None, the address it listens on or None]} for fd 0 and the descriptor the system call
    `syscall` (/proc/PID/syscall's text) waits on, and {"poll": [fds]} for a poll()."""
    parts = syscall.split()
    fds, wanted = {}, [0]
    if len(parts) > 2 and parts[0].isdigit():
        try:
            args = [int(a, 16) for a in parts[1:7]]
        except ValueError:
            args = []
        if args and int(parts[0]) in _POLLS.get(platform.machine(), ()):
            polled = _poll_fds(pid, args[0], args[1])
            fds["poll"] = polled
            wanted += polled[:4]
        elif args and args[0] < 1 << 20:
            wanted.append(args[0])
    for fd in wanted:
        try:
            link = os.readlink("/proc/%d/fd/%d" % (pid, fd))
            inode = os.stat("/proc/%d/fd/%d" % (pid, fd)).st_ino
        except OSError:
            continue
        fds[str(fd)] = [link, inode, *(_socket_ends(pid, inode) if link.startswith("socket:") else (None, None))]
    return fds
