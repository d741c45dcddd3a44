"""Facts about a log path, read where the job runs: folder, file, a write probe, free space and inodes.

Standard library only. It never truncates, moves or deletes an existing log: an existing log is opened for
append and closed untouched; a missing one is probed with a temporary file beside it, and only that is removed.
Usage: log_probe.py LOG_PATH
"""

import errno
import os
import sys
import tempfile

from _probe_support import answer


def facts(log: str) -> dict:
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
    try:
        if out["log_exists"]:
            os.close(os.open(log, os.O_WRONLY | os.O_APPEND))
        else:
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(log) + ".dfdoctor-probe-", dir=folder)
            try:
                os.write(fd, b"x")
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(tmp)
    except OSError as exc:
        out["write_error"] = {"errno": errno.errorcode.get(exc.errno, str(exc.errno)), "strerror": exc.strerror,
                              "text": str(exc)}
    st = os.statvfs(folder)
    out["free_mb"] = round(st.f_bavail * st.f_frsize / 2**20, 1)
    out["free_inodes"] = st.f_favail
    out["total_inodes"] = st.f_files
    return out


if __name__ == "__main__":
    answer(facts(sys.argv[1]))
