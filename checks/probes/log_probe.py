"""Facts about a log path, read where the job runs: folder, file, a write probe, free space and inodes.

Standard library only. It never truncates, moves or deletes an existing log: an existing log is opened for
append and closed untouched; a missing one is probed with a temporary file beside it, and only that is removed.
It also says which of the files the job's command names (the request's "named" paths: its script, its
arguments) is the log's own file, by device and inode: the job's output must never be appended to its script.
Usage: log_probe.py LOG_PATH (the request, if any: {"named": [PATH, ...]})
"""

import errno
import os
import stat
import sys

from _probe_support import answer, new_file, request


def facts(log: str, named=()) -> dict:
    """Everything log.writable needs to judge the path, as plain data."""
    folder = os.path.dirname(log) or "."
    out = {"log": log, "folder": folder, "folder_exists": os.path.exists(folder),
           "folder_is_dir": os.path.isdir(folder), "log_exists": os.path.exists(log), "log_is_dir": os.path.isdir(log)}
    if not out["folder_exists"]:
        near = folder
        while near not in ("", "/") and not os.path.exists(near):
            near = os.path.dirname(near)
        out["nearest_existing"] = near or "/"
        return out
    if not out["folder_is_dir"] or out["log_is_dir"]:
        return out
    kind = _kind(log)
    if kind not in (None, "file"):
        # Never opened: a FIFO without a reader blocks the opener for ever, a device may act on being opened.
        out["log_kind"] = kind
        if kind == "fifo":
            out["fifo_reader"] = _fifo_has_reader(log)
        return _space(folder, out)
    if kind == "file":
        # before the append-open below, which writes nothing but is the log's open all the same
        out["same_as"] = _same_as(log, named)
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    try:
        if len(os.fsencode(os.path.basename(log))) > name_max:
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG) + " (over %d bytes)" % name_max, log)
        if out["log_exists"]:
            os.close(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        else:
            # A short name of our own beside it: the log's name plus a suffix could pass NAME_MAX.
            fd, tmp = new_file(folder, ".dfdoctor-probe-")
            try:
                os.write(fd, b"x")
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(tmp)
    except OSError as exc:
        out["write_error"] = {"errno": errno.errorcode.get(exc.errno, str(exc.errno)), "strerror": exc.strerror,
                              "text": str(exc)}
    return _space(folder, out)


def _same_as(log, named):
    """The indexes of the `named` paths that are the log's own file (same device and inode). The comparison of
    dfdoctor.agent.same_file, which the recorder on a --target and dfdoctor here make, written again: a probe runs
    as a script in the user's interpreter with the files beside it in this folder alone (here, and shipped to a
    target), where the agent's package cannot be imported. tests/test_log_is_input.py holds the two to one answer."""
    try:
        st = os.stat(log)
    except OSError:
        return []
    hits = []
    for i, path in enumerate(named):
        try:
            other = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(other.st_mode) and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            hits.append(i)
    return hits


def _kind(path):
    """What the path is now: None (missing), file, fifo, chardev, blockdev, socket or other."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chardev"),
                       (stat.S_ISBLK, "blockdev"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "other"


def _fifo_has_reader(path):
    """Whether something has the FIFO open for reading now: a non-blocking open for writing fails with ENXIO
    when nothing does (and, unlike a blocking open, returns at once)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        return True
    except OSError:
        return False


def _space(folder, out):
    """Free space and inodes where the log goes, added to `out`."""
    st = os.statvfs(folder)
    out["free_mb"] = round(st.f_bavail * st.f_frsize / 2**20, 1)
    out["free_inodes"] = st.f_favail
    out["total_inodes"] = st.f_files
    return out


if __name__ == "__main__":
    asked = request() if os.environ.get("DFDOCTOR_PROBE_IN") else {}
    answer(facts(sys.argv[1], asked.get("named") or ()))
