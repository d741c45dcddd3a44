"""The job's memory cgroup: where it is, its OOM counters, a child cgroup with a limit, and the kernel's OOM
lines about a pid. Standard library only (part of the recorder)."""

import errno
import os
import time

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


CGROUP_PREFIX = "dfdoctor-"  # every child cgroup a --memory-limit makes: dfdoctor-RUN_ID
SWEEP_AGE_S = 60.0  # an empty one this old belongs to an ended run (a new one is empty only until its job joins)


def remove_cgroup(path, wait_s=3.0):
    """Remove a child cgroup we made, once its tasks have left: the processes of a job killed by the OOM killer
    or a signal take a moment to leave it, and rmdir fails (EBUSY) until they have. None once removed (or gone),
    else the reason it stays (a process of the job still in it)."""
    deadline = time.time() + wait_s
    while True:
        try:
            os.rmdir(path)
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.time() >= deadline:
                return exc.strerror or str(exc)
        time.sleep(0.05)


def _empty(path):
    """Whether no process is in the cgroup (cgroup.procs lists none)."""
    text = read_text(os.path.join(path, "cgroup.procs"))
    return text is not None and not text.strip()


def sweep_cgroups(parents, ended=(), min_age_s=SWEEP_AGE_S):
    """Remove the empty dfdoctor-* cgroups under `parents` that ended runs left (a recorder that was SIGKILLed,
    a job whose processes outlived its recorder): those named after a run in `ended` at once, any other once it
    is older than min_age_s. Returns the paths removed."""
    removed = []
    now = time.time()
    for parent in dict.fromkeys(p for p in parents if p):
        try:
            names = [n for n in os.listdir(parent) if n.startswith(CGROUP_PREFIX)]
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            try:
                old = now - os.stat(path).st_mtime >= min_age_s
            except OSError:
                continue
            if (name[len(CGROUP_PREFIX):] in ended or old) and _empty(path) and remove_cgroup(path, 0) is None:
                removed.append(path)
    return removed


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
