"""For jobs that spin the CPU on purpose: busy, but last in line for it, so the machine's other work goes first.

With kernel autogroups on, nice counts only inside one autogroup (a session's processes): os.nice(19) alone left
the spin a whole group's share against the tests' session. So the autogroup's own nice is raised too, where the
session is the job's (it leads one) or its recorder's: dfdoctor's recorder starts a session and the job in it
(its own process group, not a session: round 21's check for a session of the job's own never held under a
launch, and the spins took a full share in CI). The recorder shares that autogroup, so the job puts it back in
line (`back_in_line()`) when its silence ends, before it prints: the recorder's timing of the job's lines is then
as before. Any other session (a Slurm step's, a shell's) is left alone."""
import os

AUTOGROUP = "/proc/self/autogroup"


def _session_is_ours() -> bool:
    """This job leads its session, or dfdoctor's recorder does (its agent: `.../dfdoctor/agent recorder RUN_DIR`)."""
    sid = os.getsid(0)
    if sid == os.getpid():
        return True
    try:
        with open(f"/proc/{sid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return any(a.endswith(b"/dfdoctor/agent") for a in argv) and b"recorder" in argv


def _autogroup_nice() -> int:
    with open(AUTOGROUP) as f:
        return int(f.read().split()[-1])  # "/autogroup-N nice K"


def _set_autogroup_nice(value: int) -> bool:
    try:
        with open(AUTOGROUP, "w") as f:
            f.write(str(value))
        return True
    except (OSError, ValueError):
        return False  # no autogroups (CONFIG_SCHED_AUTOGROUP off), or not allowed: os.nice is the whole of it


def last_in_line():
    """Nice this job (and its session's autogroup where the session is its own or its recorder's); returns
    `back_in_line`, which gives the autogroup its nice back (the job itself stays niced)."""
    os.nice(19)
    if not _session_is_ours():
        return lambda: None
    try:
        before = _autogroup_nice()
    except (OSError, ValueError, IndexError):
        return lambda: None
    if before >= 19 or not _set_autogroup_nice(19):
        return lambda: None
    return lambda: _set_autogroup_nice(before)
