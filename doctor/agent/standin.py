"""The recorder's stand-in: a forked process that holds the job's output pipes too, so the job outlives a
recorder killed alone. Standard library only."""

import json
import os
import select
import signal
import time

STAND_IN_GRACE_S = 0.5  # how long the stand-in waits, after its recorder's end, before it takes over


def stand_in(alive_r, pipes, log_fd, record_path, recorder_pid):
    """The stand-in's life (see Recorder.start_stand_in): wait on `alive_r`; a byte means the recorder ended
    normally, end of file that it died. Then record that, relay `pipes` to `log_fd` until they close, and record
    when they did (the job's exit status only its parent, the lost recorder, could have seen)."""
    signal.set_wakeup_fd(-1)
    # A process group of its own: `kill -9 -PGID` of the recorder's group (a user's, a shell's job control, a
    # supervisor's) kills the recorder, not its stand-in, which then notes the loss. Killed with it, nothing
    # would be left to tell the recorder's loss from a kill of the whole job (round 3, N15).
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        said = os.read(alive_r, 1)
    except OSError:
        said = b""
    if said:
        return
    # A kill of the whole session or cgroup takes us too, a moment later: only a recorder lost alone is noted.
    # Meanwhile the pipes' buffers take what the job prints.
    time.sleep(STAND_IN_GRACE_S)

    def note(name, **data):
        data.update(t=round(time.time(), 6), event=name)
        try:
            fd = os.open(record_path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            try:
                os.write(fd, (json.dumps(data, sort_keys=True) + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    note("recorder-lost", pid=os.getpid(), recorder_pid=recorder_pid)
    open_fds = {fd: name for fd, name in pipes}
    counts = dict.fromkeys(open_fds.values(), 0)
    for fd in open_fds:
        os.set_blocking(fd, True)
    while open_fds:
        try:
            ready, _, _ = select.select(list(open_fds), [], [])
        except InterruptedError:
            continue
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                del open_fds[fd]
                continue
            counts[open_fds[fd]] += len(data)
            if log_fd is not None:
                try:
                    os.write(log_fd, data)
                except OSError:
                    pass
    note("stand-in-end", **{name + "_bytes_after": n for name, n in counts.items()})
