"""How a job and the processes it left ended, as the record says it: wait statuses, reaping as the job's
subreaper, and which leftovers still write elsewhere. Standard library only."""

import os
import signal

from dfdoctor.agent.procfs import proc_entry, readlink


def returncode(status):
    """A wait status as Popen's returncode: negative for a signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def reap():
    """Reap every child that has ended: {pid: (status, rusage)}. As the job's subreaper we get its orphans too,
    and must reap them, or they stay zombies for as long as the job runs."""
    out = {}
    while True:
        try:
            pid, status, rusage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if not pid:
            return out
        out[pid] = (status, rusage)


def how_ended(status):
    """A wait status as the record says it: exit code, or the signal's name."""
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return {"exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": signal.Signals(sig).name if sig else None}


def writing_elsewhere(pids, run_dir):
    """The processes of the job still running at its exit whose stdout or stderr goes to a file (not to us, a
    terminal or a device): `nohup python train.py > x.log &` in a launcher. Where their output went decides
    the verdict (the expected log: running; another file: log-elsewhere)."""
    ours = os.path.realpath(run_dir)
    out = []
    for pid in pids[:16]:
        streams = {}
        for fd in ("1", "2"):
            target = readlink("/proc/%d/fd/%s" % (pid, fd))
            if target and target.startswith("/") and not target.startswith(("/dev/", ours)):
                streams[fd] = target
        if streams:
            out.append(dict(proc_entry(pid), stdout=streams.get("1"), stderr=streams.get("2")))
    return out


_PRCTL = []  # libc's prctl once loaded (None where there is none): see load_prctl


def load_prctl():
    """Load libc's prctl now. A process that forks workers which each become subreapers loads it once, before its
    first fork: each worker importing ctypes itself cost 4 ms of CPU, a dozen workers a `check` (issue 45)."""
    if not _PRCTL:
        try:
            import ctypes

            _PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        except (OSError, AttributeError, ImportError):
            _PRCTL.append(None)


def become_subreaper():
    """Orphans of the job (a daemon it double-forked) become our children, not init's: we can reap them and
    learn how they ended. Linux only; elsewhere nothing changes."""
    load_prctl()
    try:
        if _PRCTL[0] is not None:
            _PRCTL[0](36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass
