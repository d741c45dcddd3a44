"""dfdoctor's flight recorder: start one job, relay its output, and write down everything that happens to it.

Run by whatever interpreter trains (even one whose torch is broken) as a part of dfdoctor's agent,
`python AGENT recorder [--detach] RUN_DIR [SPEC_JSON | -]` (AGENT: this package's folder here, the package's zip
on a target; see `dfdoctor.agent.ship`): it uses the standard library and its own package only. The spec says
what to run (argv, cwd, log, redirect, memory limit); the job's environment is the recorder's own.

Everything it writes is masked by dfdoctor's one set of rules (`dfdoctor.agent.mask`, through `record.Masker`).
The spec arrives unmasked on stdin (`-`), in a one-shot RUN_DIR/spec.in that is deleted as soon as it is read,
or on the command line; only its masked form is kept, in RUN_DIR/spec.json.

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
import subprocess
import sys
import time

from dfdoctor.agent.atomic import replace_atomically
from dfdoctor.agent.ending import become_subreaper, how_ended, reap, returncode, writing_elsewhere
from dfdoctor.agent.loop_lines import LoopLines, progress_lines
from dfdoctor.agent.memory import (kernel_oom_lines, make_limited_cgroup, memory_cgroup, oom_counters,
                                   remove_cgroup as rmdir_cgroup)
from dfdoctor.agent.names import JOB_UMASK, RUN_ENV
from dfdoctor.agent.procfs import (folder_identity, group_members, job_outputs, pipe_holders, proc_start_time,
                                   proc_usage, read_text, readlink)
from dfdoctor.agent.record import CappedCopy, Masker, Record, RunDirSpace
from dfdoctor.agent.same_file import same_file
from dfdoctor.agent.session import detach, keep_spec, read_spec
from dfdoctor.agent.standin import stand_in

TICK_S = 1.0  # heartbeat period; also bounds how stale "alive" can be
# New progress lines are in the heartbeat this soon, not at the next tick: the watch says `running` on the pace
# and loop the heartbeat shows, and waiting for the tick put that evidence up to a second late (issue 45). At
# most this often, so a job that prints thousands of lines a second costs five heartbeats a second, not more.
NEWS_S = 0.2
RECORD_HEARTBEAT_S = 15.0  # how often a heartbeat also goes into the append-only record
DRAIN_S = 0.2  # after the job dies, how long to wait for a grandchild still holding its pipes
# While the pipes stay open, how long to keep looking for who holds them: a double fork's middle process can exit
# between the moment /proc is listed and the moment its fds are read, its child not yet listed (CI saw a handed-off
# daemon called "ran to completion").
HOLDERS_S = 1.5
BLOCK_BUFFER = 8192  # Python's block buffer on a pipe (io.DEFAULT_BUFFER_SIZE): output before it is full was flushed
WATCHED_SIGNALS = ("SIGHUP", "SIGINT", "SIGTERM", "SIGQUIT", "SIGPIPE", "SIGUSR1", "SIGUSR2", "SIGALRM",
                   "SIGXCPU", "SIGTSTP", "SIGTTIN", "SIGTTOU")
FORWARDED = ("SIGINT", "SIGTERM", "SIGQUIT")  # passed on to the job's process group, which then exits
SNAPSHOT_AT = (1.0, 3.0, 10.0, 30.0)  # seconds after the start when we note where the job's output goes


def login_umask(run_dir):
    """The umask of the login shell on a target, as ship.sh kept it in the run folder (it then took 077 for the
    folder itself), or None: a local recorder already has the user's umask."""
    text = (read_text(os.path.join(run_dir, JOB_UMASK)) or "").strip()
    try:
        mask = int(text, 8)
    except ValueError:
        return None
    return mask if 0 <= mask <= 0o777 else None


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
        self.silence_before_last = None  # seconds between the last output and the one before it
        self.partial = {}
        self.progress_lines = 0
        self.beaten = (0, 0.0)  # progress_lines and time.monotonic() of the last heartbeat
        self.stdout_flushed = False  # the job's stdout delivered bytes before a block buffer was full
        self.loop = LoopLines()  # the line the job prints on every step: the settle check's sign it is past its start
        self.copies = {}
        self.watched = [dict(w, gone=False) for w in (spec.get("watch_pids") or [])]
        self.last_record_beat = 0.0
        self.last_outputs = None
        self.snapshots_done = 0
        # the run's marker "RUN_ID:NONCE" (names.RUN_ENV), given to the job in its environment and written in the
        # "recorder" and "spawned" events: what proves later that a process is this run's job (procfs.is_job_of,
        # `dfdoctor stop`), whatever a forged run folder names
        self.nonce = "%s:%s" % (spec.get("run_id") or "", os.urandom(16).hex())
        self.job_umask = login_umask(run_dir)

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
        # host: uname's node name, what socket.gethostname() answers on Linux, without the socket module's import
        self.record.event(
            "recorder", sync=True, pid=os.getpid(), ppid=os.getppid(), pgid=os.getpgid(0), sid=os.getsid(0),
            start_ticks=proc_start_time(os.getpid()), host=os.uname().nodename,
            boot_id=(read_text("/proc/sys/kernel/random/boot_id") or "").strip() or None,
            pid_ns=readlink("/proc/self/ns/pid"), cgroup=(read_text("/proc/self/cgroup") or "").strip(),
            python=sys.executable, python_version=sys.version.split()[0], uid=os.getuid(), tty=tty,
            launcher=self.spec.get("launcher"), run_id=self.spec.get("run_id"), nonce=self.nonce)

    def log_is_named(self):
        """Whether --log is the very file of one the command names for another purpose (its script, its --config:
        the spec's "named", [path, role, words] as dfdoctor read them off the command), judged here where the
        paths are the job's: the job is then not started and the log never opened, so nothing is appended to it.
        A --target's unchecked start had no other look (a local one refuses before it starts the recorder). The
        value of the job's own log option (role "log-option") is its log, not another purpose."""
        named = self.spec.get("named") or []
        if not self.log_path or not named or not self.spec.get("redirect", True):
            return False
        hits = [i for i in same_file(self.log_path, [n[0] for n in named]) if named[i][1] != "log-option"]
        if hits:
            self.record.event("log-is-named", sync=True, path=self.log_path, named=hits)
        return bool(hits)

    def open_log(self):
        """Open --log for appending, as `>> LOG` would; on failure record why and do not start the job."""
        if not self.log_path or not self.spec.get("redirect", True):
            return True
        try:
            # O_NONBLOCK: a FIFO that nothing reads fails now (ENXIO) instead of blocking the recorder for ever
            old_umask = os.umask(self.job_umask) if self.job_umask is not None else None
            try:
                fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK,
                             0o644)
            finally:
                if old_umask is not None:
                    os.umask(old_umask)
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
        job_umask = self.job_umask

        def child_setup():
            """In the job's process before exec: own process group, SIGHUP ignored, memory cgroup joined."""
            os.setpgid(0, 0)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup semantics for the job itself
            if job_umask is not None:  # the login shell's, not the 077 of the run folder (ship.sh)
                os.umask(job_umask)
            if join:
                with open(join, "w") as f:
                    f.write(str(os.getpid()))

        marker = self.nonce
        try:
            self.job = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, preexec_fn=child_setup, close_fds=True,
                                        env=dict(os.environ, **{RUN_ENV: marker}))
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
                          start_ticks=proc_start_time(self.job.pid), marker=marker,
                          folder=folder_identity(self.run_dir))
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
        self.record.event("stand-in", pid=pid, start_ticks=proc_start_time(pid))

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
        if name == "stdout" and copy.total < BLOCK_BUFFER and self.job is not None and self.job.returncode is None:
            self.stdout_flushed = True  # a block-buffered stdout delivers nothing before a block is full
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
        if self.last_output_t is not None:
            self.silence_before_last = round(now - self.last_output_t, 3)
        self.last_output_t = now
        if name not in self.first_output:
            self.first_output[name] = now
            self.record.event("output", stream=name, bytes=len(data))
            self.beat()
        return True

    def count_lines(self, name, data):
        """Count the lines that show progress (loop_lines.progress_lines) and note their shapes."""
        lines, self.partial[name] = progress_lines(self.partial.get(name, b""), data)
        now = time.time()
        self.progress_lines += len(lines)
        for line in lines:
            self.loop.add(line, now)

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
        self.beaten = (self.progress_lines, time.monotonic())
        usage = proc_usage(self.job.pid) if self.job and self.job.returncode is None else None
        beat = {"t": round(now, 3), "recorder_pid": os.getpid(), "job_pid": self.job.pid if self.job else None,
                "job_alive": bool(self.job and self.job.returncode is None), "usage": usage,
                "log_size": self.log_state[1] if self.log_state else None,
                "stdout_bytes": self._total("stdout"), "stderr_bytes": self._total("stderr"),
                "stdout_flushed": self.stdout_flushed,
                "progress_lines": self.progress_lines, "first_output_t": min(self.first_output.values()) if self.first_output else None,
                "last_output_t": self.last_output_t, "silence_before_last_s": self.silence_before_last, "loop": self.loop.best(self.masker.value),
                "recorder_usage": proc_usage(os.getpid())}
        self.note_full()
        try:
            # json.dumps: the same text by C's encoder (json.dump runs Python's, a call per piece)
            replace_atomically(os.path.join(self.run_dir, "heartbeat"), lambda f: f.write(json.dumps(beat)))
        except OSError as exc:
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
        outputs = job_outputs((group_members(self.pgid) or [self.job.pid])[:16], self.run_dir, self.log_path,
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
            reaped = reap()
            if self.job.pid in reaped:
                status, rusage = reaped[self.job.pid]
                break
        self.job.returncode = returncode(status)
        end = time.monotonic() + DRAIN_S
        while open_fds and time.monotonic() < end:  # take what is still in the pipes
            ready, _, _ = select.select(list(open_fds), [], [], max(0.0, end - time.monotonic()))
            for fd in ready:
                if not self.relay(fd):
                    open_fds.discard(fd)
        self.watch_log()
        holders = self.pipe_holders(open_fds)
        self.record_exit(status, rusage, held_open=bool(open_fds), handed_off=holders)
        if holders:
            self.relay_handoff(open_fds, holders)

    def pipe_holders(self, open_fds):
        """The processes that hold the job's output pipes after it exited; looked for again while none is found and
        the pipes stay open (someone holds them: a process between its fork and its exit)."""
        deadline = time.monotonic() + HOLDERS_S
        while open_fds:
            holders = pipe_holders(open_fds, self.stand_in_pids())
            if holders or time.monotonic() >= deadline or not _still_open(open_fds):
                return holders
            time.sleep(0.02)
        return []

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
        due = next_tick
        if self.progress_lines != self.beaten[0]:  # news not in the heartbeat yet: it goes in NEWS_S after the last
            due = min(due, self.beaten[1] + NEWS_S)
        try:
            ready, _, _ = select.select(list(open_fds) + [self.wake_r], [], [], max(0.0, due - now))
        except InterruptedError:
            ready = []
        for fd in ready:
            if fd == self.wake_r:
                _drain_fd(fd)
            elif not self.relay(fd):
                open_fds.discard(fd)
        if self.progress_lines != self.beaten[0] and time.monotonic() >= self.beaten[1] + NEWS_S:
            self.beat()
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
            ended.update({pid: how_ended(st) for pid, (st, _) in reap().items() if pid in watched})
        end = time.monotonic() + DRAIN_S
        while watched - set(ended) and time.monotonic() < end:  # they closed the pipes: their ends follow
            time.sleep(0.02)
            ended.update({pid: how_ended(st) for pid, (st, _) in reap().items() if pid in watched})
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
        how = how_ended(status)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        oom_after = oom_counters(self.mem[0], self.mem[1])
        kernel = kernel_oom_lines(self.job.pid) if sig == signal.SIGKILL else []
        leftovers = group_members(self.pgid)
        self.record.event(
            "exit", sync=True, pid=self.job.pid, exit_code=how["exit_code"], signal=how["signal"], signum=sig,
            core_dumped=bool(os.WIFSIGNALED(status) and os.WCOREDUMP(status)),
            wall_s=round(time.time() - self.t_spawn, 3), max_rss_kb=rusage.ru_maxrss,
            utime_s=round(rusage.ru_utime, 3), stime_s=round(rusage.ru_stime, 3),
            oom_before=self.oom_before, oom_after=oom_after, memory_cgroup=self.mem[1], kernel=kernel,
            stdout_bytes=self._total("stdout"), stderr_bytes=self._total("stderr"),
            log_size=self.log_state[1] if self.log_state else None, leftovers=leftovers,
            leftover_starts={str(p): proc_start_time(p) for p in leftovers}, pipes_held_open=held_open,
            handed_off=list(handed_off), left_writing=writing_elsewhere(leftovers, self.run_dir))
        self.beat()
        self.remove_cgroup()

    def remove_cgroup(self):
        """Remove the child cgroup we made (only possible once nothing is left in it)."""
        mem = getattr(self, "mem", None)
        if mem and mem[2]:
            error = rmdir_cgroup(mem[1])
            if error:  # `dfdoctor status` sweeps it once it is empty (memory.sweep_cgroups)
                self.record.event("cgroup-left", cgroup=mem[1], error=error)


def _still_open(fds):
    """Whether some process still holds the write end of one of these pipes (no hang-up reported on it)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    events = dict(poller.poll(0))
    return any(not events.get(fd, 0) & select.POLLHUP for fd in fds)


def _drain_fd(fd):
    """Empty the signal wake-up pipe."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def main(argv):
    """`recorder [--detach] RUN_DIR [SPEC_JSON | -]`: run the job the spec describes and record it.

    The spec comes on stdin (`-`), as SPEC_JSON, in the one-shot RUN_DIR/spec.in, or from RUN_DIR/spec.json.
    RUN_DIR is created if missing; the spec is kept there masked.
    """
    args = argv[1:]
    detached = bool(args) and args[0] == "--detach"
    if detached:
        args = args[1:]
    if len(args) not in (1, 2):
        sys.stderr.write("usage: recorder [--detach] RUN_DIR [SPEC_JSON | -]\n")
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
    if not rec.log_is_named() and rec.open_log() and rec.spawn():
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
