"""Whether the end of the line's session has done all it can to the job: the margin of the hang-up race, seen
instead of waited for.

After the line's terminal hung up, the job counts as alive at its first heartbeat written once the end of its
session has done its work: SIGHUP to the terminal's processes, lxc-attach ending its command's process group,
a closed channel failing the next write. The runner waited a fixed SETTLE_S for that. Where every place the line
reaches is one ssh host and containers of it (quiet.py), that work can be seen done instead, when the sentinel
itself says it is out of reach of everything but the line's own processes:
- it has no controlling terminal (no hang-up of a terminal, the remote sshd's own included, can reach it);
- its stdout and stderr are files or /dev/null (no channel or pipe that closes under it);
- it is in no login session's cgroup (a logind that kills a session's processes when it ends);
then what may still end it is a process of the line as it ends (a shell's SIGHUP to its jobs, lxc-attach's kill
of the process group, pct exec), and each of those carries the rehearsal's mark: once the host (which sees its
containers' processes) says none but the sentinel is left, and none is left here (runner._line_lives), every
signal their ends send has been sent. A beat written after that is a job that outlived its session. Where any of
it cannot be said, the fixed margin stays.
"""

from __future__ import annotations

from typing import Optional

QUIET_KINDS = ("file", "null")  # where a job's output may go without a session's end reaching it


def sentinel_pid(start: dict) -> Optional[int]:
    """The sentinel's pid (in its own pid namespace) when what it said of itself (start.json) puts it out of
    reach of its session's end but through the line's own processes; None where it may be reached otherwise."""
    pid = start.get("pid")
    if not isinstance(pid, int) or start.get("tty") != "":
        return None
    fds = start.get("fds") or []
    if len(fds) < 3 or any(fd.get("kind") not in QUIET_KINDS for fd in fds[1:3]):
        return None
    cgroup = start.get("cgroup")
    if not isinstance(cgroup, list) or any("session-" in ln and ".scope" in ln for ln in cgroup):
        return None
    return pid
