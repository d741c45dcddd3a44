"""The job's memory cgroup: where it is, its OOM counters, a child cgroup with a limit, and the kernel's OOM
lines about a pid. Standard library only (part of the recorder)."""

import errno
import os

from dfdoctor.agent.procfs import read_text


def memory_cgroup():
    """(version, directory) of this process's memory cgroup, or (None, None)."""
    text = read_text("/proc/self/cgroup") or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            d = "/sys/fs/cgroup/memory" + parts[2]
            if os.path.isdir(d):
                return 1, d.rstrip("/")
    for line in text.splitlines():
        if line.startswith("0::"):
            for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                d = root + line[3:]
                if os.path.exists(os.path.join(d, "memory.events")):
                    return 2, d.rstrip("/")
    return None, None


def oom_counters(version, d):
    """The cgroup's OOM counters: v1 memory.oom_control or v2 memory.events."""
    if not d:
        return None
    text = read_text(os.path.join(d, "memory.oom_control" if version == 1 else "memory.events"))
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


def make_limited_cgroup(version, parent, name, limit):
    """A child memory cgroup with `limit` bytes, for a real OOM kill instead of a slow machine; its path."""
    if not parent:
        raise OSError(errno.ENOENT, "no memory cgroup is mounted where the recorder runs (/proc/self/cgroup names "
                      "none found under /sys/fs/cgroup), so no limit can be set there")
    d = os.path.join(parent, name)
    os.mkdir(d)
    with open(os.path.join(d, "memory.limit_in_bytes" if version == 1 else "memory.max"), "w") as f:
        f.write(str(int(limit)))
    return d


def kernel_oom_lines(pid):
    """Kernel log lines about the OOM killer and this pid, read from /dev/kmsg without blocking."""
    lines = []
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return lines
    try:
        for _ in range(100000):  # bounded: the ring buffer is finite, but never trust that
            try:
                rec = os.read(fd, 8192).decode("utf-8", "replace")
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten record: keep reading
                    continue
                break
            if not rec:
                break
            msg = rec.split(";", 1)[-1].strip()
            if ("Killed process %d " % pid) in msg or ("pid=%d," % pid) in msg:
                lines.append(msg[:400])
    finally:
        os.close(fd)
    return lines[-5:]
