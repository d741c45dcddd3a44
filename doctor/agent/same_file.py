"""Whether a log is the very file of a path the job's command names (its script, a config): the same device and
inode, so a hard link or a symlink to it counts. The job's output must never be appended to such a file.

Standard library only, Python 3.6 syntax: it travels in the agent, and the flight recorder asks it where the job
runs, before it opens the log (the paths are that machine's). `dfdoctor.named_files` asks it on this machine. The
log probe (checks/probes/log_probe.py) keeps its own copy of these lines: a probe runs as a script in the user's
interpreter and ships with the files beside it in checks/probes/, where no module of this package can be imported.
"""

import os
import stat


def same_file(log, paths):
    """The indexes of `paths` that are `log`'s own file; none when `log` does not exist or is not a regular file
    (a missing log is created by the open; a FIFO or a device is not appended to by anyone's mistake)."""
    try:
        st = os.stat(log)
    except (OSError, ValueError):
        return []
    if not stat.S_ISREG(st.st_mode):
        return []
    hits = []
    for i, path in enumerate(paths):
        try:
            other = os.stat(path)
        except (OSError, ValueError):
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            hits.append(i)
    return hits
