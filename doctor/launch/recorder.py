"""dfdoctor's flight recorder: start one job, relay its output, and write down everything that happens to it.

Run as a plain script, `python recorder.py [--detach] RUN_DIR [SPEC_JSON | -]`, by whatever interpreter
trains (even one whose torch is broken): it uses the standard library only and imports nothing from
dfdoctor, so it can also be shipped to a remote python over stdin (`python3 - --detach DIR SPEC`). The spec
says what to run (argv, cwd, log, redirect, memory limit); the job's environment is the recorder's own.

Everything it writes is masked by dfdoctor's one set of rules, `redact.py`: loaded from beside this file's
package, or embedded in the copy that is shipped (`REDACT_SOURCE`). The spec arrives unmasked on stdin (`-`), in
a one-shot RUN_DIR/spec.in that is deleted as soon as it is read, or on the command line; only its masked form
is kept, in RUN_DIR/spec.json.

The record, RUN_DIR/record.jsonl, is append-only: one JSON object per line, each written with a single
O_APPEND write, so a crash mid-write can only lose the line being written, never one already there.
RUN_DIR/heartbeat is replaced atomically every second; capped copies of the job's stdout and stderr go
to RUN_DIR/{stdout,stderr}.log (head) and *.tail.{0,1} (the newest bytes).
"""

import errno
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

TICK_S = 1.0  # heartbeat period; also bounds how stale "alive" can be
RECORD_HEARTBEAT_S = 15.0  # how often a heartbeat also goes into the append-only record
DRAIN_S = 0.2  # after the job dies, how long to wait for a grandchild still holding its pipes
HEAD_CAP = 4 << 20  # bytes of each stream kept from the start
SEG_CAP = 1 << 20  # bytes per tail segment; two segments keep the newest 1-2 MiB
STAND_IN_GRACE_S = 0.5  # how long the stand-in waits, after its recorder's end, before it takes over
RESERVE_BYTES = 64 << 10  # room kept in the run folder for the record when its file system fills up
PENDING_CAP = 64 << 10  # bytes of an unfinished line held back so a secret is never masked in two halves
WATCHED_SIGNALS = ("SIGHUP", "SIGINT", "SIGTERM", "SIGQUIT", "SIGPIPE", "SIGUSR1", "SIGUSR2", "SIGALRM",
                   "SIGXCPU", "SIGTSTP", "SIGTTIN", "SIGTTOU")
FORWARDED = ("SIGINT", "SIGTERM", "SIGQUIT")
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".jsonl")
SNAPSHOT_AT = (1.0, 3.0, 10.0, 30.0)  # seconds after the start when we note where the job's output goes  # passed on to the job's process group, which then exits


REDACT_SOURCE = None  # the text of dfdoctor/redact.py, put here in the copy remote_run ships (one file)


def load_redact():
    """dfdoctor's masking rules (redact.py) as a module: embedded when shipped, else the file beside our package."""
    import types

    source = REDACT_SOURCE
    if source is None:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "redact.py")
        with open(path) as f:
            source = f.read()
    module = types.ModuleType("dfdoctor_redact")
    exec(compile(source, "redact.py", "exec"), module.__dict__)
    return module


class Masker:
    """What the recorder writes down, masked: the secrets of its environment and of the job's argv, and the
    patterns every dfdoctor output is masked by. Without the rules (a broken copy) every string is hidden."""

    def __init__(self, argv=(), env=None):
        try:
            red = load_redact().Redactor.from_env(dict(os.environ if env is None else env))
            red.learn_argv(list(argv or ()))
            self.redactor = red
        except Exception as exc:  # never a plain record: mask all, and say why
            self.redactor = None
            self.error = "%s: %s" % (type(exc).__name__, exc)

    def value(self, obj):
        """A JSON-like value with every secret masked."""
        if self.redactor is not None:
            return self.redactor.value(obj)
        if isinstance(obj, str):
            return "***" if obj else obj
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.value(x) for x in obj]
        return obj

    def env(self, env):
        """An environment with secret-named values and secret values masked."""
        return self.redactor.env(env) if self.redactor is not None else {k: "***" for k in env}

    def data(self, data):
        """Bytes the job wrote, masked (undecodable bytes kept as they are)."""
        if self.redactor is None:
            return b"*** (output not kept: masking rules unavailable)\n" if data else data
        text = data.decode("utf-8", "surrogateescape")
        return self.redactor.text(text).encode("utf-8", "surrogateescape")

    def held_back(self, masked):
        """How many bytes at the end of masked output could begin a secret (redact.Redactor.held_back)."""
        if self.redactor is None or not masked:
            return 0
        text = masked.decode("utf-8", "surrogateescape")
        held = self.redactor.held_back(text)
        return len(text[len(text) - held:].encode("utf-8", "surrogateescape")) if held else 0


class RunDirSpace:
    """Room kept back in the run folder for the record's last words. A full file system there (the job's own
    output filled it, or anything else did) must not cost the record its heartbeat and the job's exit: the
    first write that fails for want of space frees the reserve, and from then on the stream copies stop (their
    byte counts go on) so what is freed goes to the record."""

    NAME = ".reserve"

    def __init__(self, run_dir):
        self.path = os.path.join(run_dir, self.NAME)
        self.full = None  # the first ENOSPC/EDQUOT, once seen
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, b"\0" * RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:
            self.release()  # no room even for the reserve: whatever part was written is no use

    def hit(self, exc):
        """Whether `exc` is a want of space; the first one frees the reserve."""
        if getattr(exc, "errno", None) not in (errno.ENOSPC, errno.EDQUOT):
            return False
        if self.full is None:
            self.full = (exc.errno, time.time())
            self.release()
        return True

    def release(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


class Record:
    """The append-only record: each event one JSON line, written by one O_APPEND write, masked."""

    def __init__(self, path, masker=None, space=None):
        """Open the record for appending (created if missing)."""
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.masker = masker
        self.space = space

    def event(self, name, sync=False, **data):
        """Append one event with its wall-clock time; fsync the ones a reboot must not lose."""
        if self.masker is not None:
            data = self.masker.value(data)
        data["t"] = round(time.time(), 6)
        data["event"] = name
        line = (json.dumps(data, default=str, sort_keys=True) + "\n").encode()
        for _ in range(2):  # once more when the first failure freed the reserve
            try:
                os.write(self.fd, line)
                if sync:
                    os.fsync(self.fd)
                return
            except OSError as exc:  # a full disk must not stop us relaying the job's output
                if self.space is None or not self.space.hit(exc):
                    return


class CappedCopy:
    """A capped on-disk copy of one stream, masked: the first HEAD_CAP bytes, then two alternating tail segments.

    Masking goes line by line (an unfinished line waits, up to PENDING_CAP, for its end or the next tick), so a
    secret written in pieces is still seen whole; what is kept of an unfinished line stops short of an end that
    could begin a secret, which waits for the rest however long it takes."""

    def __init__(self, run_dir, name, masker=None, space=None):
        """Open the head file; tail segments open when the head is full."""
        self.masker = masker
        self.space = space
        self.pending = b""
        self.pending_ticks = 0
        self.base = os.path.join(run_dir, name)
        self.head = os.open(self.base + ".log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.head_len = 0
        self.seg = None
        self.seg_index = 1
        self.seg_len = 0
        self.total = 0

    def write(self, data):
        """Keep `data`, masked, up to its last complete line; the rest waits for its end."""
        self.total += len(data)
        if self.masker is None:
            self._keep(data)
            return
        data = self.pending + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        self.pending_ticks = 0
        if len(data) - cut > PENDING_CAP:
            self.pending = b""
            self._keep_masked(data)
            return
        self.pending = data[cut:]
        if cut:
            self._keep(self.masker.data(data[:cut]))

    def tick(self, final=False):
        """An unfinished line that waited a whole tick (a prompt, a progress bar) is kept, but for its end
        when that could be the start of a secret; at the end (`final`) whatever waits is kept."""
        self.pending_ticks += 1
        if self.pending and (final or self.pending_ticks > 1):
            data, self.pending = self.pending, b""
            if self.masker is None:
                self._keep(data)
            else:
                self._keep_masked(data, final)

    def _keep_masked(self, data, final=False):
        """Keep `data` masked, all but its end when that could begin a secret: that end waits (in `pending`)
        for what follows, so a secret cut by a flush, whether by time or by size, is masked whole."""
        masked = self.masker.data(data)
        held = 0 if final else self.masker.held_back(masked)
        if held:
            self.pending, masked = masked[-held:], masked[:-held]
        self._keep(masked)

    def _keep(self, data):
        """Write `data`: in the head while it has room, else in the current tail segment; nothing once the run
        folder is full (what is left there is the record's)."""
        if self.space is not None and self.space.full:
            return
        try:
            room = HEAD_CAP - self.head_len
            if room > 0:
                os.write(self.head, data[:room])
                self.head_len += min(room, len(data))
                data = data[room:]
            while data:
                if self.seg is None or self.seg_len >= SEG_CAP:
                    self._rotate()
                part = data[: SEG_CAP - self.seg_len]
                os.write(self.seg, part)
                self.seg_len += len(part)
                data = data[len(part):]
        except OSError as exc:
            if self.space is not None:
                self.space.hit(exc)

    def _rotate(self):
        """Start the other tail segment afresh: the older bytes in it are the ones we drop."""
        if self.seg is not None:
            os.close(self.seg)
        self.seg_index = 1 - self.seg_index
        self.seg = os.open("%s.tail.%d" % (self.base, self.seg_index),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self.seg_len = 0


def stand_in(alive_r, pipes, log_fd, record_path, recorder_pid):
    """The stand-in's life (see Recorder.start_stand_in): wait on `alive_r`; a byte means the recorder ended
    normally, end of file that it died. Then record that, relay `pipes` to `log_fd` until they close, and record
    when they did (the job's exit status only its parent, the lost recorder, could have seen)."""
    signal.set_wakeup_fd(-1)
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


def proc_start_time(pid):
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def proc_usage(pid):
    """The process's resident memory (bytes) and CPU time (seconds), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return {"rss": int(fields[21]) * os.sysconf("SC_PAGE_SIZE"),
                "cpu_s": round((int(fields[11]) + int(fields[12])) / ticks, 2)}
    except (OSError, ValueError, IndexError):
        return None


def read_text(path):
    """A small file's text, or None."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


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


class Recorder:
    """Starts the job described by spec.json and records its life until it ends."""

    def __init__(self, run_dir, spec, masker=None):
        """Nothing runs yet: `spawn` starts the job."""
        self.run_dir = run_dir
        self.spec = spec
        self.masker = masker or Masker(spec.get("argv"))
        self.space = RunDirSpace(run_dir)
        self.noted_full = False
        self.record = Record(os.path.join(run_dir, "record.jsonl"), self.masker, self.space)
        self.pending_signals = []
        self.job = None
        self.pgid = None
        self.log_fd = None
        self.log_path = spec.get("log")
        self.log_state = None  # (exists, size) as last seen
        self.first_output = {}
        self.last_output_t = None
        self.partial = {}
        self.progress_lines = 0
        self.copies = {}
        self.watched = [dict(w, gone=False) for w in (spec.get("watch_pids") or [])]
        self.last_record_beat = 0.0
        self.last_outputs = None
        self.snapshots_done = 0

    # -- signals ------------------------------------------------------------------------------------------
    def install_signals(self):
        """Note every signal we get instead of dying of it; forward the ones that mean 'stop'."""
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_r = r
        signal.set_wakeup_fd(w)
        for name in WATCHED_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is not None:
                signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through the wakeup fd

    def _on_signal(self, num, frame):
        """Only note the signal; the main loop records it (no I/O in a handler)."""
        self.pending_signals.append((num, time.time()))

    def flush_signals(self, extra_pids=()):
        """Record the signals received since last time, forwarding SIGINT/TERM/QUIT to the job (and, after a
        hand-off, to the processes it handed its work to)."""
        while self.pending_signals:
            num, t = self.pending_signals.pop(0)
            name = signal.Signals(num).name
            forwarded = False
            if name in FORWARDED and self.pgid and self.job and self.job.returncode is None:
                try:
                    os.killpg(self.pgid, num)
                    forwarded = True
                except OSError:
                    pass
            for pid in extra_pids if name in FORWARDED else ():
                try:
                    os.kill(pid, num)
                    forwarded = True
                except OSError:
                    pass
            self.record.event("signal", sync=True, signal=name, received_t=t, forwarded=forwarded)

    # -- start --------------------------------------------------------------------------------------------
    def describe_self(self):
        """Who and where the recorder is: enough to tell later whether it still lives and what killed it."""
        try:
            tty = os.ttyname(0)
        except OSError:
            tty = None
        self.record.event(
            "recorder", sync=True, pid=os.getpid(), ppid=os.getppid(), pgid=os.getpgid(0), sid=os.getsid(0),
            start_ticks=proc_start_time(os.getpid()), host=socket.gethostname(),
            boot_id=(read_text("/proc/sys/kernel/random/boot_id") or "").strip() or None,
            pid_ns=_readlink("/proc/self/ns/pid"), cgroup=(read_text("/proc/self/cgroup") or "").strip(),
            python=sys.executable, python_version=sys.version.split()[0], uid=os.getuid(), tty=tty,
            launcher=self.spec.get("launcher"), run_id=self.spec.get("run_id"))

    def open_log(self):
        """Open --log for appending, as `>> LOG` would; on failure record why and do not start the job."""
        if not self.log_path or not self.spec.get("redirect", True):
            return True
        try:
            # O_NONBLOCK: a FIFO that nothing reads fails now (ENXIO) instead of blocking the recorder for ever
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
            os.set_blocking(fd, True)
            self.log_fd = fd
        except OSError as exc:
            self.record.event("log-open-failed", sync=True, path=self.log_path, errno=exc.errno,
                              errname=errno.errorcode.get(exc.errno, "?"), strerror=exc.strerror)
            return False
        return True

    def spawn(self):
        """Start the job in its own process group, stdin from /dev/null, its output through us."""
        argv = self.spec["argv"]
        cwd = self.spec.get("cwd") or None
        mem_version, mem_dir = memory_cgroup()
        job_cgroup = mem_dir
        limit = self.spec.get("memory_limit")
        if limit:
            try:
                job_cgroup = make_limited_cgroup(mem_version, mem_dir, "dfdoctor-" + str(self.spec.get("run_id")), limit)
                self.record.event("memory-limit", cgroup=job_cgroup, limit=int(limit))
            except (OSError, TypeError) as exc:
                job_cgroup = mem_dir
                self.record.event("memory-limit-failed", sync=True, error=str(exc), cgroup=mem_dir)
        self.mem = (mem_version, job_cgroup, job_cgroup != mem_dir)
        oom_before = oom_counters(mem_version, job_cgroup)
        join = os.path.join(job_cgroup, "cgroup.procs") if self.mem[2] else None

        def child_setup():
            """In the job's process before exec: own process group, SIGHUP ignored, memory cgroup joined."""
            os.setpgid(0, 0)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup semantics for the job itself
            if join:
                with open(join, "w") as f:
                    f.write(str(os.getpid()))

        try:
            self.job = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, preexec_fn=child_setup, close_fds=True)
        except OSError as exc:
            self.record.event("spawn-failed", sync=True, argv=argv, cwd=cwd, errno=exc.errno,
                              errname=errno.errorcode.get(exc.errno, "?"), strerror=exc.strerror,
                              filename=getattr(exc, "filename", None))
            self.remove_cgroup()
            return False
        except subprocess.SubprocessError as exc:  # preexec_fn failed (e.g. cgroup join refused)
            self.record.event("spawn-failed", sync=True, argv=argv, cwd=cwd, errno=None, errname="preexec",
                              strerror=str(exc), filename=None)
            self.remove_cgroup()
            return False
        self.pgid = self.job.pid
        self.t_spawn = time.time()
        self.oom_before = oom_before
        self.record.event("spawned", sync=True, pid=self.job.pid, pgid=self.pgid, sid=os.getsid(0), argv=argv,
                          cwd=os.path.abspath(cwd or os.getcwd()), env=self.masker.env(dict(os.environ)),
                          log=self.log_path,
                          redirect=bool(self.spec.get("redirect", True)), oom_before=oom_before,
                          memory_cgroup=job_cgroup, cgroup_version=mem_version,
                          start_ticks=proc_start_time(self.job.pid))
        for name, pipe in (("stdout", self.job.stdout), ("stderr", self.job.stderr)):
            os.set_blocking(pipe.fileno(), False)
            self.copies[pipe.fileno()] = (name, CappedCopy(self.run_dir, name, self.masker, self.space))
        self.start_stand_in()
        return True

    def start_stand_in(self):
        """Fork the stand-in: a process that holds the job's output pipes too and sleeps until we end. Should we
        die abruptly (SIGKILL, a crash), the job's next print would otherwise break its pipe and kill it: the
        stand-in notes that we were lost and goes on relaying the job's output to --log until the job closes it."""
        self.stand_in = None
        try:
            r, w = os.pipe()
            pid = os.fork()
        except OSError as exc:
            self.record.event("stand-in-failed", error=str(exc))
            return
        if pid == 0:
            try:
                os.close(w)
                stand_in(r, [(fd, name) for fd, (name, _) in self.copies.items()], self.log_fd,
                         os.path.join(self.run_dir, "record.jsonl"), os.getppid())
            finally:
                os._exit(0)
        os.close(r)
        self.stand_in = (pid, w)

    def stand_in_pids(self):
        return (self.stand_in[0],) if getattr(self, "stand_in", None) else ()

    def dismiss_stand_in(self):
        """We end normally: the stand-in has nothing to do."""
        if getattr(self, "stand_in", None):
            try:
                os.write(self.stand_in[1], b"x")
                os.close(self.stand_in[1])
            except OSError:
                pass
            self.stand_in = None

    # -- running ------------------------------------------------------------------------------------------
    def relay(self, fd):
        """Move what the job wrote on one pipe into its copy and the log; False at end of file."""
        name, copy = self.copies[fd]
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            return False
        copy.write(data)
        self.count_lines(name, data)
        if self.log_fd is not None:
            try:
                os.write(self.log_fd, data)
            except OSError as exc:
                if "log-write-failed" not in self.first_output:
                    self.first_output["log-write-failed"] = time.time()
                    self.record.event("log-write-failed", sync=True, errno=exc.errno,
                                      errname=errno.errorcode.get(exc.errno, "?"), strerror=exc.strerror)
        now = time.time()
        self.last_output_t = now
        if name not in self.first_output:
            self.first_output[name] = now
            self.record.event("output", stream=name, bytes=len(data))
            self.beat()
        return True

    def count_lines(self, name, data):
        """Count the lines that show progress: not warnings, not traceback or continuation lines."""
        text = self.partial.get(name, b"") + data
        lines = text.split(b"\n")
        self.partial[name] = lines.pop()[-4096:]
        for line in lines:
            if line.strip() and not line[:1].isspace() and b"Warning:" not in line and \
                    not line.startswith(b"Traceback (most recent call last)"):
                self.progress_lines += 1

    def watch_log(self):
        """Note when the log file first appears and first grows (it may be written by the job itself)."""
        if not self.log_path:
            return
        try:
            st = os.stat(self.log_path)
            state = (True, st.st_size)
        except OSError:
            state = (False, 0)
        if self.log_state is None:
            self.log_state = state
            self.log_initial = state[1]
            self.record.event("log-initial", path=self.log_path, exists=state[0], size=state[1])
            return
        if state[0] and not self.log_state[0]:
            self.record.event("log-appeared", path=self.log_path, size=state[1])
        if state[1] > self.log_initial and not getattr(self, "log_grew", False):
            self.log_grew = True
            self.record.event("log-grew", path=self.log_path, size=state[1])
        self.log_state = state

    def watch_launcher(self):
        """Note when the process that launched us, or its session, goes away (dfdoctor exits, ssh ends)."""
        for w in self.watched:
            if not w["gone"] and proc_start_time(w["pid"]) != w.get("start_ticks"):
                w["gone"] = True
                self.record.event("launcher-gone", sync=True, role=w.get("role"), pid=w["pid"])

    def beat(self):
        """Replace the heartbeat file; now and then also append a heartbeat to the record."""
        now = time.time()
        usage = proc_usage(self.job.pid) if self.job and self.job.returncode is None else None
        beat = {"t": round(now, 3), "recorder_pid": os.getpid(), "job_pid": self.job.pid if self.job else None,
                "job_alive": bool(self.job and self.job.returncode is None), "usage": usage,
                "log_size": self.log_state[1] if self.log_state else None,
                "stdout_bytes": self._total("stdout"), "stderr_bytes": self._total("stderr"),
                "progress_lines": self.progress_lines, "first_output_t": min(self.first_output.values()) if self.first_output else None,
                "last_output_t": self.last_output_t,
                "recorder_usage": proc_usage(os.getpid())}
        self.note_full()
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=".heartbeat.", dir=self.run_dir)
            with os.fdopen(fd, "w") as f:
                json.dump(beat, f)
            os.replace(tmp, os.path.join(self.run_dir, "heartbeat"))
        except OSError as exc:
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if self.space.hit(exc):
                self._beat_in_place(beat)
        if self.job and self.job.returncode is None:
            self.note_outputs(now)
        if now - self.last_record_beat >= RECORD_HEARTBEAT_S:
            self.last_record_beat = now
            self.record.event("heartbeat", **{k: v for k, v in beat.items() if k != "t"})

    def _beat_in_place(self, beat):
        """No room for a new heartbeat file: overwrite the old one's blocks (padded, so no stale tail is left;
        a reader takes trailing spaces)."""
        path = os.path.join(self.run_dir, "heartbeat")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            text = json.dumps(beat).encode()
            size = os.fstat(fd).st_size
            os.pwrite(fd, text + b" " * max(0, size - len(text)), 0)
        except OSError:
            pass
        finally:
            os.close(fd)

    def note_full(self):
        """Say once, in the record, that the run folder's file system is full and the stream copies stopped."""
        if self.space.full and not self.noted_full:
            self.noted_full = True
            err, t = self.space.full
            self.record.event("run-dir-full", sync=True, errname=errno.errorcode.get(err, "?"), at=round(t, 3),
                              stdout_bytes=self._total("stdout"), stderr_bytes=self._total("stderr"))

    def note_outputs(self, now):
        """Now and then, note where the job's processes send fds 1 and 2 and which log-like files they write."""
        due = SNAPSHOT_AT[self.snapshots_done] if self.snapshots_done < len(SNAPSHOT_AT) else \
            SNAPSHOT_AT[-1] + RECORD_HEARTBEAT_S * (self.snapshots_done - len(SNAPSHOT_AT) + 1)
        if now - self.t_spawn < due:
            return
        self.snapshots_done += 1
        outputs = job_outputs((_group_members(self.pgid) or [self.job.pid])[:16], self.run_dir, self.log_path,
                              self.job.pid)
        if outputs != self.last_outputs:
            self.last_outputs = outputs
            self.record.event("outputs", **outputs)

    def flush_copies(self, final=False):
        """Let the stream copies keep an unfinished line that has waited long enough (all of it when `final`)."""
        for _, copy in self.copies.values():
            copy.tick(final)

    def _total(self, name):
        """Bytes the job wrote so far on stream `name`."""
        for n, copy in self.copies.values():
            if n == name:
                return copy.total
        return 0

    def run(self):
        """Relay output and tick until the job has exited; then record how it ended."""
        open_fds = set(self.copies)
        next_tick = time.monotonic()
        status = rusage = None
        while True:
            next_tick = self.pump(open_fds, next_tick)
            self.flush_signals()
            reaped = _reap()
            if self.job.pid in reaped:
                status, rusage = reaped[self.job.pid]
                break
        self.job.returncode = _returncode(status)
        end = time.monotonic() + DRAIN_S
        while open_fds and time.monotonic() < end:  # take what is still in the pipes
            ready, _, _ = select.select(list(open_fds), [], [], max(0.0, end - time.monotonic()))
            for fd in ready:
                if not self.relay(fd):
                    open_fds.discard(fd)
        self.watch_log()
        holders = pipe_holders(open_fds, self.stand_in_pids()) if open_fds else []
        self.record_exit(status, rusage, held_open=bool(open_fds), handed_off=holders)
        if holders:
            self.relay_handoff(open_fds, holders)

    def pump(self, open_fds, next_tick):
        """One turn of the relay loop: the periodic looks when due, then relay whatever is ready (a pipe that
        closed leaves open_fds). Returns when the next looks are due."""
        now = time.monotonic()
        if now >= next_tick:
            self.watch_log()
            self.watch_launcher()
            self.flush_copies()
            self.beat()
            next_tick = now + TICK_S
        try:
            ready, _, _ = select.select(list(open_fds) + [self.wake_r], [], [], max(0.0, next_tick - now))
        except InterruptedError:
            ready = []
        for fd in ready:
            if fd == self.wake_r:
                _drain_fd(fd)
            elif not self.relay(fd):
                open_fds.discard(fd)
        return next_tick

    def relay_handoff(self, open_fds, holders):
        """The command exited but left its output pipes to processes it started (a launcher that backgrounds
        the trainer, a daemon): keep relaying until they close them. Closing our end now would kill them with
        EPIPE on their next print. Their ends are reaped here (the recorder is their subreaper) with status."""
        self.record.event("handoff", sync=True, holders=holders)
        watched = {h["pid"] for h in holders}
        ended = {}
        next_tick = time.monotonic()
        while open_fds:
            next_tick = self.pump(open_fds, next_tick)
            self.flush_signals(extra_pids=watched - set(ended))
            ended.update({pid: _how_ended(st) for pid, (st, _) in _reap().items() if pid in watched})
        end = time.monotonic() + DRAIN_S
        while watched - set(ended) and time.monotonic() < end:  # they closed the pipes: their ends follow
            time.sleep(0.02)
            ended.update({pid: _how_ended(st) for pid, (st, _) in _reap().items() if pid in watched})
        self.watch_log()
        self.flush_copies(final=True)
        self.record.event("handoff-ended", sync=True, wall_s=round(time.time() - self.t_spawn, 3),
                          ended=[dict(pid=pid, **st) for pid, st in sorted(ended.items())],
                          log_size=self.log_state[1] if self.log_state else None,
                          stdout_bytes=self._total("stdout"), stderr_bytes=self._total("stderr"))

    def record_exit(self, status, rusage, held_open, handed_off=()):
        """Write the exit event: status or signal, resources, OOM counters, kernel lines, leftovers, and the
        processes that still hold the job's output pipes (handed_off)."""
        self.flush_copies(final=True)
        self.note_full()
        how = _how_ended(status)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        oom_after = oom_counters(self.mem[0], self.mem[1])
        kernel = kernel_oom_lines(self.job.pid) if sig == signal.SIGKILL else []
        leftovers = _group_members(self.pgid)
        self.record.event(
            "exit", sync=True, pid=self.job.pid, exit_code=how["exit_code"], signal=how["signal"], signum=sig,
            core_dumped=bool(os.WIFSIGNALED(status) and os.WCOREDUMP(status)),
            wall_s=round(time.time() - self.t_spawn, 3), max_rss_kb=rusage.ru_maxrss,
            utime_s=round(rusage.ru_utime, 3), stime_s=round(rusage.ru_stime, 3),
            oom_before=self.oom_before, oom_after=oom_after, memory_cgroup=self.mem[1], kernel=kernel,
            stdout_bytes=self._total("stdout"), stderr_bytes=self._total("stderr"),
            log_size=self.log_state[1] if self.log_state else None, leftovers=leftovers,
            leftover_starts={str(p): proc_start_time(p) for p in leftovers}, pipes_held_open=held_open,
            handed_off=list(handed_off), left_writing=_writing_elsewhere(leftovers, self.run_dir))
        self.beat()
        self.remove_cgroup()

    def remove_cgroup(self):
        """Remove the child cgroup we made (only possible once nothing is left in it)."""
        mem = getattr(self, "mem", None)
        if mem and mem[2]:
            try:
                os.rmdir(mem[1])
            except OSError as exc:
                self.record.event("cgroup-left", cgroup=mem[1], error=exc.strerror)


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
            target = _readlink(base + "/" + fd)
            if not target or not target.startswith("/") or target.startswith(ours) or target == expected:
                continue
            if fd in ("1", "2"):
                if not target.startswith(("/dev/pts", "/dev/tty")) and \
                        (pid == main_pid or not target.startswith("/dev/")):
                    streams.append([pid, int(fd), target])
            elif target.endswith(LOG_SUFFIXES) and not target.startswith(("/dev/", "/proc/", "/sys/")) \
                    and _fd_writable(pid, fd):
                files.append([pid, target, _size(target)] if sizes else [pid, target])
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
    tty = (_readlink("/proc/%d/fd/1" % pid) or "").startswith(("/dev/pts", "/dev/tty"))
    return not unbuffered and not tty


def _size(path):
    """A file's size in bytes, -1 when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _fd_writable(pid, fd):
    """Whether the fd is open for writing (O_WRONLY or O_RDWR in /proc/PID/fdinfo)."""
    text = read_text("/proc/%d/fdinfo/%s" % (pid, fd)) or ""
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                return int(line.split()[1], 8) & 0o3 in (1, 2)
            except (ValueError, IndexError):
                return False
    return False


def _readlink(path):
    """Where a /proc link points, or None."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def _drain_fd(fd):
    """Empty the signal wake-up pipe."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def _returncode(status):
    """A wait status as Popen's returncode: negative for a signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _group_members(pgid):
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


def _writing_elsewhere(pids, run_dir):
    """The processes of the job still running at its exit whose stdout or stderr goes to a file (not to us, a
    terminal or a device): `nohup python train.py > x.log &` in a launcher. Where their output went decides
    the verdict (the expected log: running; another file: log-elsewhere)."""
    ours = os.path.realpath(run_dir)
    out = []
    for pid in pids[:16]:
        streams = {}
        for fd in ("1", "2"):
            target = _readlink("/proc/%d/fd/%s" % (pid, fd))
            if target and target.startswith("/") and not target.startswith(("/dev/", ours)):
                streams[fd] = target
        if streams:
            out.append(dict(_proc_entry(pid), stdout=streams.get("1"), stderr=streams.get("2")))
    return out


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
            out.append(_proc_entry(int(n)))
    return out[:20]


def _proc_entry(pid):
    """How the record names a process of the job: pid, start time (to tell it from a recycled pid), command."""
    cmd = (read_text("/proc/%d/cmdline" % pid) or "").replace("\0", " ").strip()
    return {"pid": pid, "start_ticks": proc_start_time(pid), "cmdline": cmd[:200]}


def _reap():
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


def _how_ended(status):
    """A wait status as the record says it: exit code, or the signal's name."""
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return {"exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": signal.Signals(sig).name if sig else None}


def become_subreaper():
    """Orphans of the job (a daemon it double-forked) become our children, not init's: we can reap them and
    learn how they ended. Linux only; elsewhere nothing changes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError, ImportError):
        pass


def detach(run_dir):
    """Leave the caller's session for good: SIGHUP ignored before forking, a new session, stdin from
    /dev/null, output to RUN_DIR/recorder.out. The caller gets the recorder's pid on stdout and returns."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        answer = os.read(r, 64)
        os.waitpid(pid, 0)
        sys.stdout.write(answer.decode() + "\n")
        sys.stdout.flush()
        os._exit(0 if answer else 1)
    os.close(r)
    os.setsid()
    if os.fork():
        os._exit(0)  # the session leader goes; its child can never regain a terminal
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(os.path.join(run_dir, "recorder.out"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    os.write(w, str(os.getpid()).encode())
    os.close(w)


def read_spec(run_dir, given=None):
    """The spec as handed over, unmasked: `-` on stdin, SPEC_JSON itself, else the one-shot RUN_DIR/spec.in
    (deleted once read), else RUN_DIR/spec.json."""
    if given == "-":
        spec = json.loads(sys.stdin.read())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # nothing keeps the pipe dfdoctor handed the spec through
        os.close(null)
        return spec
    if given is not None:
        return json.loads(given)
    one_shot = os.path.join(run_dir, "spec.in")
    try:
        with open(one_shot) as f:
            spec = json.load(f)
    except FileNotFoundError:
        with open(os.path.join(run_dir, "spec.json")) as f:
            return json.load(f)
    finally:
        try:
            os.unlink(one_shot)
        except OSError:
            pass
    return spec


def keep_spec(run_dir, spec, masker):
    """RUN_DIR/spec.json: the spec masked (replaced atomically, and only when it would change)."""
    text = json.dumps(masker.value(spec), indent=1)
    path = os.path.join(run_dir, "spec.json")
    if read_text(path) == text:
        return
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=".spec.json.", dir=run_dir)  # 0600, a name nobody could plant
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv):
    """`recorder.py [--detach] RUN_DIR [SPEC_JSON | -]`: run the job the spec describes and record it.

    The spec comes on stdin (`-`), as SPEC_JSON (a remote python that receives this file on stdin gets
    everything else on its command line: `python3 - --detach DIR SPEC`), in the one-shot RUN_DIR/spec.in, or
    from RUN_DIR/spec.json. RUN_DIR is created if missing; the spec is kept there masked.
    """
    args = argv[1:]
    detached = bool(args) and args[0] == "--detach"
    if detached:
        args = args[1:]
    if len(args) not in (1, 2):
        sys.stderr.write("usage: recorder.py [--detach] RUN_DIR [SPEC_JSON | -]\n")
        return 2
    run_dir = args[0]
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    spec = read_spec(run_dir, args[1] if len(args) == 2 else None)
    masker = Masker(spec.get("argv"))
    keep_spec(run_dir, spec, masker)
    if detached:
        detach(run_dir)
    rec = Recorder(run_dir, spec, masker)
    become_subreaper()
    rec.install_signals()
    rec.describe_self()
    if masker.redactor is None:
        rec.record.event("masking-unavailable", sync=True, error=masker.error)
    rec.watch_log()  # before we create it: did the log exist already?
    if rec.open_log() and rec.spawn():
        rec.run()
    rec.flush_copies(final=True)
    rec.flush_signals()
    rec.note_full()
    rec.record.event("recorder-exit", sync=True)
    rec.space.release()
    rec.dismiss_stand_in()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
