"""Which of a finished job's leftover processes still run, read where the job ran.

Standard library only. A pid counts as the same process only if its start time (field 22 of /proc/PID/stat)
is the one the recorder wrote down: a recycled pid is someone else's process, and dfdoctor must never tell a
user to kill it. A zombie holds nothing and is not counted. A process is `proved` the job's only when the run's
nonce (given to the job by the recorder) is in its environment: a forged run folder can name any pid and start
time, and dfdoctor names a pid to stop only when it is proved.
Input (JSON in the file $DFDOCTOR_PROBE_IN): {"starts": {"PID": START_TICKS_OR_NULL, ...}, "nonce": NONCE_OR_NULL}
"""

NONCE_VAR = "DFDOCTOR_RUN"  # dfdoctor.agent.names.RUN_ENV (the run's marker): a probe travels alone



def _stat(pid):
    """(state, start ticks) of a live process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def _has_nonce(pid, nonce):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return ("%s=%s" % (NONCE_VAR, nonce)).encode() in f.read().split(b"\0")
    except OSError:
        return False


def still_running(recorded, nonce=None):
    """{pid: start} -> [{"pid", "cmdline", "proved"}] of those that are the same process and not a zombie."""
    out = []
    for key, start in recorded.items():
        pid = int(key)
        st = _stat(pid)
        if st is None or st[0] == "Z" or (start is not None and st[1] != start):
            continue
        out.append({"pid": pid, "cmdline": _cmdline(pid), "proved": bool(nonce) and _has_nonce(pid, nonce)})
    return out


if __name__ == "__main__":
    from _probe_support import answer, request

    req = request()
    answer({"alive": still_running(req.get("starts") or {}, req.get("nonce"))})
