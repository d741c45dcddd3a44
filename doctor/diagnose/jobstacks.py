"""The whole job, sampled: every process of its tree (torchrun's agent and ranks, DataLoader workers, a
launcher's children), its Python stacks and its kernel wait, taken twice a second or more apart.

Twice, because one look cannot tell "stuck" from "passing through": a rank seen in `all_reduce` once is
working; seen there twice, with the same frames and no CPU spent, it waits. The dumps of one round run in
parallel (py-spy pauses each process for a few milliseconds), so sixteen processes cost about one dump.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

import psutil
from dfdoctor.diagnose import elastic, stacks
from dfdoctor.diagnose.kernelwait import KernelWait, kernel_wait
from dfdoctor.agent.procfs import buffers_stdout
from dfdoctor.diagnose.look_times import AHEAD_GAPS, DUMP_TIMEOUT_S, GAP_S, MAX_PROCESSES  # noqa: F401
from dfdoctor.numbers import whole

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor



@dataclass
class Look:
    """One process at one moment: its stacks, its kernel wait, the CPU it had spent."""

    stacks: stacks.Stacks
    kernel: KernelWait
    cpu_s: Optional[float]
    switches: Optional[int] = None  # the main thread's context switches: a thread that wakes up moves this
    at: Optional[float] = None  # when `switches` was read (seconds, one clock per process's looks); None: not known
    voluntary: Optional[int] = None  # of those, the voluntary ones: the thread blocked (a sleep, a read) and woke


@dataclass
class ProcessSample:
    """One process of the job, looked at twice."""

    pid: int
    ppid: Optional[int]
    cmdline: list[str]
    python: bool
    rank: Optional[int] = None  # RANK from its environment (torchrun sets it for each worker)
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    buffered: bool = False  # Python with stdout block-buffered
    store: Optional[str] = None  # MASTER_ADDR:MASTER_PORT from its environment: where init_process_group connects
    joined: Optional[bool] = None  # holds a connection to that store (it called init_process_group); None: unknown
    asked: Optional[dict] = None  # torchrun's agent: its options, from its command line or PET_ env (elastic)
    endpoint: Optional[str] = None  # torchrun's agent: its rendezvous endpoint, from its command line or PET_ env
    on_endpoint: Optional[bool] = None  # the agent holds an established connection there; None: not read
    looks: list[Look] = field(default_factory=list)
    gone: bool = False  # ended between the two samples
    exited: Optional[int] = None  # a dead child nobody reaped (a zombie): its wait status (exit code << 8, or signal)
    here: bool = True  # a process of this machine (psutil may look at it again); False: a target's, as its agent saw it

    @property
    def last(self) -> Optional[Look]:
        return self.looks[-1] if self.looks else None

    def cpu_spent(self) -> Optional[float]:
        """CPU seconds spent between the first and the last look."""
        if len(self.looks) < 2 or self.looks[0].cpu_s is None or self.looks[-1].cpu_s is None:
            return None
        return self.looks[-1].cpu_s - self.looks[0].cpu_s

    def wakeups(self) -> Optional[int]:
        """Times the main thread was switched in between the first and the last look (a loop of short sleeps
        or reads shows here even when it spends no CPU; a thread in one long wait shows about none)."""
        if len(self.looks) < 2 or self.looks[0].switches is None or self.looks[-1].switches is None:
            return None
        return self.looks[-1].switches - self.looks[0].switches

    def woken_from_waits(self) -> Optional[int]:
        """Times the main thread blocked (a sleep, a read) and was woken between the first and the last look: its
        voluntary context switches. The others are preemptions of a thread that runs, which load adds to a loop
        of sleeps as it runs between them (wakeups() counts both); where a look did not read the voluntary ones
        (an older agent's), all of them."""
        first, last = (self.looks[0], self.looks[-1]) if len(self.looks) >= 2 else (None, None)
        if first is None or first.voluntary is None or last.voluntary is None:
            return self.wakeups()
        return last.voluntary - first.voluntary

    def span_s(self) -> float:
        """Seconds between the reads of the first and the last look (the gap a look was asked for where the reads'
        times are not known): a loop of 0.2 s sleeps wakes 5 times a second whether the looks were 1.0 or 1.3 s
        apart, where the count alone is 5 or 7."""
        first, last = (self.looks[0].at, self.looks[-1].at) if self.looks else (None, None)
        return last - first if first is not None and last is not None and last > first else GAP_S

    def name(self) -> str:
        """`pid 42 (rank 1)` or `pid 40 (torchrun)`: how evidence lines name it."""
        cmd = " ".join(self.cmdline)
        if self.rank is not None:
            role = f"rank {self.rank}"
        elif "torchrun" in cmd or "torch.distributed.run" in cmd or "torch.distributed.launch" in cmd:
            role = "torchrun"
        else:
            role = os.path.basename(self.cmdline[0]) if self.cmdline else "?"
        return f"pid {self.pid} ({role})"


def tree(pid: int) -> list[psutil.Process]:
    """The job's process and its descendants, parents before children."""
    return stacks.family(pid)[:MAX_PROCESSES]


def describe(p: psutil.Process) -> Optional[ProcessSample]:
    """Who a process is: its command, whether it runs Python, its rank (a zombie: a dead child with its exit)."""
    try:
        if p.status() == psutil.STATUS_ZOMBIE:
            return ProcessSample(p.pid, p.ppid(), [], False, gone=True, exited=exit_status(p.pid))
        cmd = p.cmdline()
        exe = os.path.basename(p.exe() or (cmd[0] if cmd else ""))
        ppid = p.ppid()
        env = p.environ()
    except psutil.Error:
        return None
    is_py = "python" in exe
    sample = ProcessSample(p.pid, ppid, cmd, is_py)
    if is_py:
        sample.rank = whole(env["RANK"], None) if "RANK" in env and "LOCAL_RANK" in env else None
        sample.local_rank = whole(env.get("LOCAL_RANK", ""), None)
        sample.world_size = whole(env.get("WORLD_SIZE", ""), None)
        read_rendezvous(sample, env, lambda: tcp_connections(p))
        try:
            sample.buffered = buffers_stdout(p.pid, cmd, env)
        except Exception:  # reading another process's fds can race its exit
            sample.buffered = False
    return sample


def exit_status(pid: int) -> Optional[int]:
    """A zombie's wait status, as its parent would reap it (/proc/PID/stat's exit_code field, Linux 3.5+)."""
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return whole(fields[-1], None) if len(fields) >= 50 else None


def exit_words(status: Optional[int]) -> str:
    """`exit 3`, `killed by signal 9`, for a wait status."""
    if status is None:
        return "exit unknown"
    return f"killed by signal {status & 0x7f}" if status & 0x7f else f"exit {status >> 8}"


def read_rendezvous(s: ProcessSample, env: dict, connections: Callable[[], Optional[list]]) -> None:
    """Where the process meets the others, from its environment and its TCP connections: a rank's rendezvous
    store (MASTER_ADDR:MASTER_PORT) and whether it holds a connection there, or torchrun's agent's rendezvous
    endpoint and whether it is connected to it. One reading for a process of this machine and one of a target
    (its agent sends the named variables and the connections, diagnose/look.samples_of). `connections()`:
    [(host:port at the other end, state), ...], None when its sockets cannot be read; asked only when needed."""
    if s.rank is not None and env.get("MASTER_PORT"):
        s.store = f"{env.get('MASTER_ADDR') or '?'}:{env['MASTER_PORT']}"
        s.joined = joined_store(connections, whole(env["MASTER_PORT"], None))
    elif s.rank is None and elastic.is_agent(s.cmdline):
        s.asked = elastic.torchrun_asked(s.cmdline, env)
        if elastic.standalone(s.asked):  # its store is its own, on localhost at a port it picked: none is named
            s.on_endpoint = on_loopback(connections)
            return
        s.endpoint = elastic.endpoint_of(s.asked)[1]
        s.on_endpoint = connected(connections, whole(s.endpoint.rsplit(":", 1)[-1], None))


def on_loopback(connections: Callable[[], Optional[list]]) -> Optional[bool]:
    """Whether the process holds an established TCP connection to an address of this machine's loopback
    (torchrun --standalone's agent to the rendezvous store it serves itself, on localhost). None when its sockets
    cannot be read."""
    found = connections()
    if found is None:
        return None
    return any(str(state) == psutil.CONN_ESTABLISHED and _loopback(str(peer).rsplit(":", 1)[0])
               for peer, state in found)


def _loopback(host: str) -> bool:
    host = host.strip("[]")
    return host.startswith(("127.", "::ffff:127.")) or host in ("::1", "localhost")


def tcp_connections(p: psutil.Process) -> Optional[list]:
    """[(host:port at the other end, state), ...] of a local process's TCP sockets that have another end; None
    when its sockets cannot be read."""
    try:
        return [(f"{c.raddr.ip}:{c.raddr.port}", c.status) for c in p.net_connections(kind="tcp") if c.raddr]
    except (psutil.Error, OSError):
        return None


def _ports(connections: Callable[[], Optional[list]], port: Optional[int]) -> Optional[list[str]]:
    """The states of the connections whose other end is `port`; None when not known."""
    found = connections() if port is not None else None
    if found is None:
        return None
    return [str(state) for peer, state in found if str(peer).rsplit(":", 1)[-1] == str(port)]


def joined_store(connections: Callable[[], Optional[list]], port: Optional[int]) -> Optional[bool]:
    """Whether the process holds a TCP connection to the rendezvous store's port: env:// init_process_group
    connects there and the process group keeps that connection, so a rank without one has not joined (yet).
    None when its sockets cannot be read."""
    states = _ports(connections, port)
    return None if states is None else bool(states)


def connected(connections: Callable[[], Optional[list]], port: Optional[int]) -> Optional[bool]:
    """Whether the process holds an established TCP connection to `port` (torchrun's agent to its rendezvous
    store: a connect still under way is not one). None when its sockets cannot be read."""
    states = _ports(connections, port)
    return None if states is None else psutil.CONN_ESTABLISHED in states


def _look(s: ProcessSample, timeout: float) -> Look:
    """Kernel wait, stacks and CPU time of one process now (the kernel first: nothing has disturbed it yet)."""
    kernel = kernel_wait(s.pid)
    st = stacks.dump(s.pid, timeout, nonblocking=True) if s.python else \
        stacks.Stacks(s.pid, stacks.kernel_view(s.pid), "kernel", "not a Python process")
    try:
        t = psutil.Process(s.pid).cpu_times()
        cpu = t.user + t.system
    except psutil.Error:
        cpu = None
    switches, voluntary = _switches(s.pid)
    return Look(st, kernel, cpu, switches, time.monotonic(), voluntary)


def _switches(pid: int) -> tuple[Optional[int], Optional[int]]:
    """(voluntary plus involuntary, voluntary) context switches of the main thread (/proc/PID/task/PID/status)."""
    try:
        text = open(f"/proc/{pid}/task/{pid}/status").read()
    except OSError:
        return None, None
    total, voluntary = 0, None
    for line in text.splitlines():
        if "ctxt_switches:" in line:
            n = whole(line.split(":", 1)[1].strip(), 0) or 0
            total += n
            voluntary = n if line.startswith("voluntary_") else voluntary
    return total, voluntary


def _safe_look(s: ProcessSample, timeout: float) -> Look:
    """A look that never raises: a process that ends mid-look, or a /proc file that vanishes, is a look with
    what could be read."""
    try:
        return _look(s, timeout)
    except Exception as exc:  # the verdict must not be lost to one process's race with its own exit
        return Look(stacks.Stacks(s.pid, "", "kernel", f"{type(exc).__name__}: {exc}"), KernelWait("unknown"), None)


def _round(samples: list[ProcessSample], pool: ThreadPoolExecutor, timeout: float) -> None:
    """One look at every process, in parallel (a zombie has nothing to look at: its exit is what it says)."""
    samples = [s for s in samples if s.exited is None]
    for s, look in zip(samples, pool.map(lambda s: _safe_look(s, timeout), samples)):
        if not psutil.pid_exists(s.pid):
            s.gone = True
        s.looks.append(look)


@dataclass
class Round:
    """The first round of a look, taken ahead of it (`first_round`): when it began and when its reads had all
    ended (time.monotonic()), and what it saw. The second round's gap counts from `ended`: under load py-spy may
    take most of a gap to start, and a read that ends late is a read taken late."""

    began: float
    ended: float
    samples: list[ProcessSample]
    used: bool = False  # a look took it as its first round


def first_round(pid: int, timeout: float = DUMP_TIMEOUT_S) -> Optional[Round]:
    """One look at every process of the job's tree now, for a `sample_job` to come (None: no process)."""
    began = time.monotonic()
    samples = [s for s in (describe(p) for p in tree(pid)) if s is not None]
    if not samples:
        return None
    from concurrent.futures import ThreadPoolExecutor  # here: it brings logging, and a watch of a job that
    # talks takes no look (leftovers.py does the same)

    with ThreadPoolExecutor(max_workers=min(16, len(samples))) as pool:
        _round(samples, pool, timeout)
    return Round(began, time.monotonic(), samples)


def sample_job(pid: int, rounds: int = 2, gap_s: float = GAP_S, timeout: float = DUMP_TIMEOUT_S,
               ahead: Optional[Round] = None) -> list[ProcessSample]:
    """Every process of the job's tree, looked at `rounds` times `gap_s` apart (the gap counted from the end of
    one round's reads to the start of the next: counted from its start, a py-spy slow to start under load read the
    first round late, and two reads were 0.80 s apart at load 14, where a wait that passes in less than a gap must
    not show in both). `ahead`: a first round taken already, which counts as the first when it saw the very
    processes the tree has now and ended at most AHEAD_GAPS gaps ago (the rounds that follow keep their gap from
    it; a look's reads are then one to three gaps apart, never less)."""
    samples = [s for s in (describe(p) for p in tree(pid)) if s is not None]
    if not samples:
        return []
    done, ended = 0, None
    if ahead is not None and time.monotonic() - ahead.ended <= AHEAD_GAPS * gap_s and \
            {s.pid for s in ahead.samples} == {s.pid for s in samples}:
        samples, done, ended = ahead.samples, 1, ahead.ended
        ahead.used = True
    from concurrent.futures import ThreadPoolExecutor  # here: see first_round

    with ThreadPoolExecutor(max_workers=min(16, len(samples))) as pool:
        for _ in range(done, rounds):
            if ended is not None:
                time.sleep(max(0.0, gap_s - (time.monotonic() - ended)))
            _round(samples, pool, timeout)
            ended = time.monotonic()
    return samples


def look_once(samples: list[ProcessSample], timeout: float = DUMP_TIMEOUT_S) -> None:
    """One look at each of `samples`, in parallel."""
    if samples:
        from concurrent.futures import ThreadPoolExecutor  # here: see first_round

        with ThreadPoolExecutor(max_workers=min(16, len(samples))) as pool:
            _round(samples, pool, timeout)
