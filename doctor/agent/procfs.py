"""What dfdoctor reads of a process in /proc: its stat fields, start time, usage, fds, and where a job's output
goes. Standard library only (it runs on targets, under the job's interpreter): the one reader of /proc/PID/stat
that the recorder, the target agent and dfdoctor itself share."""

import os
import sys
import time

from dfdoctor.agent.names import RUN_ENV

LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".jsonl")
_TEMP_NAME = set("abcdefghijklmnopqrstuvwxyz0123456789_")  # the letters of Python's tempfile names


def made_by_tempfile(path):
    """A file Python's tempfile named (tmpXXXXXXXX[.suffix]) in a temp folder: a job capturing a helper's output
    (torch inductor's autotune workers write their stderr there), never a log a user chose and would follow."""
    folder, name = os.path.split(path)
    stem = name.split(".", 1)[0]
    return folder in ("/tmp", "/var/tmp", os.environ.get("TMPDIR", "/tmp").rstrip("/")) and len(stem) == 11 and \
        stem.startswith("tmp") and set(stem[3:]) <= _TEMP_NAME


def stat_fields(pid, tid=None):
    """The fields of /proc/PID/stat (of thread `tid` when given) after the command name, or None when it is
    gone. The name, in parentheses, may hold spaces and ")": the fields start after the last ")". Index 0 is
    field 3 of proc(5) (the state), so field N is at N - 3."""
    path = "/proc/%d/stat" % pid if tid is None else "/proc/%d/task/%s/stat" % (pid, tid)
    try:
        data = _read_bytes(path)
        # the fields after the name are ASCII: only they are decoded (a watch reads this 20 times a second, and a
        # text file's reader costs more than the read)
        fields = data.rsplit(b")", 1)[1].decode("ascii").split()
    except (OSError, IndexError):
        return None
    return fields or None


def _read_bytes(path):
    """A small file's bytes, read by the fd (no file object: /proc's files are read often)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts = []
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
    finally:
        os.close(fd)


def _field(pid, index):
    """One integer field of stat_fields, or None."""
    fields = stat_fields(pid)
    try:
        return int(fields[index]) if fields else None
    except (ValueError, IndexError):
        return None


def proc_state(pid):
    """The process's state letter (R, S, D, Z, ...), or None when it is gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else None


def proc_ppid(pid):
    """The process's parent pid, or None."""
    return _field(pid, 1)


def proc_start_time(pid):
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    return _field(pid, 19)


def proc_cpu_s(pid):
    """CPU seconds (user + system) the process has spent, or None."""
    fields = stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (TypeError, ValueError, IndexError):
        return None


def proc_usage(pid):
    """The process's resident memory (bytes) and CPU time (seconds), or None when it is gone."""
    fields = stat_fields(pid)
    try:
        return {"rss": int(fields[21]) * os.sysconf("SC_PAGE_SIZE"),
                "cpu_s": round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)}
    except (TypeError, ValueError, IndexError):
        return None


def read_text(path):
    """A small file's text, or None."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


# A thread woken from a short wait is "running" in /proc/PID/syscall until the CPU takes it, though it only passes
# between two waits: under load a loop of 0.1 s sleeps was read "running" at the look, then idle by py-spy, in both
# looks, and called output-buffered (CI, round 25). Read again after these pauses while it says running: a thread
# that works stays running (17 ms more of wall, no CPU), one between two waits is back in the next.
SYSCALL_REREADS_S = (0.002, 0.005, 0.01)


def settled_syscall(pid):
    """/proc/PID/syscall's text (None where it cannot be read), read again while it says "running" (see above)."""
    text = read_text("/proc/%d/syscall" % pid)
    for pause in SYSCALL_REREADS_S:
        if text is None or not text.startswith("running"):
            break
        time.sleep(pause)
        text = read_text("/proc/%d/syscall" % pid)
    return text


def environ(pid, having=None):
    """The environment process `pid` was started with, as a dict; None when it cannot be read (gone, or another
    user's). With `having` (a name): {} without parsing it when no entry can be that name's (the bytes
    `having=` are nowhere in it): `dfdoctor stop` asks every process of the machine for one variable."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if having is not None and (having + "=").encode() not in data:
        return {}
    pairs = (e.decode("utf-8", "replace").split("=", 1) for e in data.split(b"\0") if b"=" in e)
    return dict(p for p in pairs if len(p) == 2)


def cmdline(pid):
    """The process's argv (empty when it is gone, a zombie, or a kernel thread)."""
    return [a for a in (read_text("/proc/%d/cmdline" % pid) or "").split("\0") if a]


def readlink(path):
    """Where a /proc link points, or None."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def folder_identity(path):
    """A folder's (device, inode) as a list (JSON keeps it so), or None: what tells the run folder the recorder
    wrote into from a copy of it (`cp -a` keeps every byte and name, never the inode); a `mv` keeps it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def is_a_copy(spawned, run_dir):
    """Whether `run_dir` is a copy of the run folder its recorder wrote into (`cp -a` of the project while the job
    ran): the record's "spawned" event names that folder by identity, and this one is another (a record made
    before it was noted says nothing: False)."""
    return bool(spawned) and spawned.get("folder") is not None and spawned["folder"] != folder_identity(run_dir)


def file_size(path):
    """A file's size in bytes, -1 when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def fd_writable(pid, fd):
    """Whether the fd is open for writing (O_WRONLY or O_RDWR in /proc/PID/fdinfo)."""
    text = read_text("/proc/%d/fdinfo/%s" % (pid, fd)) or ""
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                return int(line.split()[1], 8) & 0o3 in (1, 2)
            except (ValueError, IndexError):
                return False
    return False


def job_outputs(pids, run_dir, log_path, main_pid=None, sizes=False):
    """Where the processes' stdout/stderr point (when not at us or a terminal) and the log files they write:
    {"streams": [[pid, fd, path]], "files": [[pid, path]]}, each file with its size in bytes (-1: cannot stat)
    when `sizes`. The one reading of a job's fds: the record's "outputs" events, a local look at a live job
    (`dfdoctor.launch.local`) and one on a target (`target_agent`) all use it.

    Only the job's own process (`main_pid`) counts when its output goes to a device (/dev/null): helpers it
    starts often silence their output on purpose.
    """
    ours = os.path.realpath(run_dir)
    expected = os.path.realpath(log_path) if log_path else None
    streams, files = [], []
    for pid in pids:
        base = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        for fd in fds:
            target = readlink(base + "/" + fd)
            if not target or not target.startswith("/") or target.startswith(ours) or target == expected or \
                    made_by_tempfile(target):
                continue
            if fd in ("1", "2"):
                if not target.startswith(("/dev/pts", "/dev/tty")) and \
                        (pid == main_pid or not target.startswith("/dev/")):
                    streams.append([pid, int(fd), target])
            elif target.endswith(LOG_SUFFIXES) and not target.startswith(("/dev/", "/proc/", "/sys/")) \
                    and fd_writable(pid, fd):
                files.append([pid, target, file_size(target)] if sizes else [pid, target])
    return {"streams": streams, "files": files}


def buffers_stdout(pid, argv, env):
    """Whether Python process `pid` (its `argv` and environment) block-buffers its stdout: it goes to no terminal
    and neither -u (alone or in a cluster such as -Bu) nor a non-empty PYTHONUNBUFFERED asked otherwise. The
    one reading of it: a local look (`dfdoctor.launch.local`) and one on a target (`target_agent`) use it."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    args = list(argv[1:])
    while args and args[0].startswith("-") and args[0] not in ("-", "--"):  # options end at the script
        a = args.pop(0)
        if a == "--check-hash-based-pycs":
            args[:1] = []
        if a.startswith("--"):
            continue
        letters = a[1:]  # a cluster: -uB, -Wignore, -X dev, -uc CODE
        cut = min([letters.find(c) for c in "WXmc" if c in letters] or [len(letters)])
        unbuffered = unbuffered or "u" in letters[:cut]
        if cut < len(letters) and letters[cut] in "mc":
            break  # what follows -m MODULE or -c CODE is the program's
        if cut == len(letters) - 1:
            args[:1] = []  # the value of -W or -X given apart
    tty = (readlink("/proc/%d/fd/1" % pid) or "").startswith(("/dev/pts", "/dev/tty"))
    return not unbuffered and not tty


_KEPT = []  # whether this kernel keeps children lists (CONFIG_PROC_CHILDREN), once asked


def kernel_lists_children():
    """Whether this kernel keeps each thread's list of children in /proc (CONFIG_PROC_CHILDREN)."""
    if not _KEPT:
        _KEPT.append(os.path.exists("/proc/self/task/%d/children" % os.getpid()))
    return _KEPT[0]


def children(pid):
    """The pids of the process's children, in ascending order ([] when it is gone), from the kernel's list of
    each of its threads' children (a child forked by a thread is that thread's). Only where
    `kernel_lists_children()`: elsewhere only reading every process's parent tells them."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []
    out = set()
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid), "rb") as f:
                out.update(int(w) for w in f.read().split())
        except (OSError, ValueError):
            continue  # the thread ended as we read
    return sorted(out)


def descendants(root):
    """The descendants of `root` (itself left out), parents before children, in the order psutil's
    children(recursive=True) gives them; None where the kernel keeps no children lists. Only the tree's own
    processes are read: psutil reads every process of the machine on each walk (issue 45: a launch's watch walks
    its job's tree several times, on a machine that runs a test suite's hundreds of processes)."""
    if not kernel_lists_children():
        return None
    out, todo, seen = [], [root], {root}
    while todo:
        for kid in children(todo.pop()):
            if kid not in seen:
                seen.add(kid)
                out.append(kid)
                todo.append(kid)
    return out


def group_members(pgid):
    """Pids still in the job's process group after its leader died (daemons, stray workers)."""
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if n.isdigit():
            try:
                if os.getpgid(int(n)) == pgid:
                    out.append(int(n))
            except OSError:
                pass
    return out[:50]


def proc_entry(pid):
    """How the record names a process of the job: pid, start time (to tell it from a recycled pid), command."""
    cmd = (read_text("/proc/%d/cmdline" % pid) or "").replace("\0", " ").strip()
    return {"pid": pid, "start_ticks": proc_start_time(pid), "cmdline": cmd[:200]}


def pipe_holders(fds, exclude=()):
    """Processes (other than us and `exclude`: our stand-in) that hold the pipes we read from `fds`."""
    wanted = set()
    for fd in fds:
        try:
            wanted.add("pipe:[%d]" % os.fstat(fd).st_ino)
        except OSError:
            pass
    me, out = os.getpid(), []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit() or int(n) == me or int(n) in exclude:
            continue
        try:
            links = {os.readlink("/proc/%s/fd/%s" % (n, fd)) for fd in os.listdir("/proc/%s/fd" % n)}
        except OSError:
            continue
        if links & wanted:
            out.append(proc_entry(int(n)))
    return out[:20]


def proc_cmdline(pid):
    """The process's argv words, or None when it is gone or cannot be read."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            data = f.read()
    except (OSError, TypeError):
        return None
    return [w.decode("utf-8", "surrogateescape") for w in data.split(b"\0") if w]


def psutil_cmdline(pid):
    """The process's argv as psutil's Process.cmdline() gives it on Linux (read with the file system's encoding;
    [] for a zombie or a kernel thread, where psutil raises or gives [] too; a title set with spaces for NULs
    split at the spaces), for the watch's question whether a job runs torchrun without importing psutil.
    OSError when it is gone."""
    with open("/proc/%d/cmdline" % pid, encoding=sys.getfilesystemencoding(),
              errors=sys.getfilesystemencodeerrors()) as f:
        data = f.read()
    if not data:
        return []
    sep = "\x00" if data.endswith("\x00") else " "
    if data.endswith(sep):
        data = data[:-1]
    words = data.split(sep)
    if sep == "\x00" and len(words) == 1 and " " in data:
        words = data.split(" ")
    return words


def proc_environ_value(pid, name):
    """One variable of the environment the process was started with (readable by its own user and root only),
    or None."""
    try:
        data = _read_bytes("/proc/%d/environ" % pid)
    except (OSError, TypeError):
        return None
    prefix = name.encode() + b"="
    # the first entry that starts with it, found without splitting every entry (a watch asks 20 times a second)
    at = 0 if data.startswith(prefix) else data.find(b"\0" + prefix) + 1
    if at <= 0 and not data.startswith(prefix):
        return None
    end = data.find(b"\0", at)
    return data[at + len(prefix):end if end >= 0 else len(data)].decode("utf-8", "surrogateescape")


def is_recorder_of(rec, run_dir):
    """Whether the recorder a record's "recorder" event names runs now as the recorder of `run_dir`: the same
    pid and start time, and its command line names that very folder (the recorder, and its stand-in, a fork of
    it, run `... recorder RUN_DIR`). A forged record naming another process fails this."""
    pid = rec.get("pid") if rec else None
    if not isinstance(pid, int) or isinstance(pid, bool) or proc_start_time(pid) != rec.get("start_ticks"):
        return False
    here = readlink("/proc/%d/cwd" % pid)  # a relative RUN_DIR (a relative --cwd on a target) is the recorder's
    words = [w if os.path.isabs(w) else os.path.join(here, w) for w in proc_cmdline(pid) or ()
             if os.path.isabs(w) or here]
    if str(run_dir) in words:  # the very path (as the launch wrote it): no link to resolve, part by part, in each
        return True            # word (a status's watch asked 20 times a second, issue 45)
    want = os.path.realpath(run_dir)
    return any(os.path.realpath(w) == want for w in words)


def is_job_of(spawned, rec, run_dir):
    """Whether the job a record's "spawned" event names runs now as this run's job: the same pid and start time,
    the very folder its recorder wrote into (not a copy), and either the nonce of the recorder's event in its environment, or (a run recorded before the nonce, or a
    job that cleared its environment) a session that is the proved recorder's own (no process can join another
    session: setsid(2))."""
    pid = spawned.get("pid") if spawned else None
    if not isinstance(pid, int) or isinstance(pid, bool) or proc_start_time(pid) != spawned.get("start_ticks"):
        return False
    if is_a_copy(spawned, run_dir):
        return False  # the job is the original folder's
    nonce = (rec or {}).get("nonce")
    if nonce and proc_environ_value(pid, RUN_ENV) == nonce:
        return True
    fields = stat_fields(pid)
    try:
        session = int(fields[3]) if fields else None
    except (ValueError, IndexError):
        return False
    return session is not None and session == (rec or {}).get("sid") and is_recorder_of(rec, run_dir)
