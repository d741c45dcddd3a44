"""One training interpreter for a phase's probes: torch imported once, each probe a fork of it.

Every probe used to start the training interpreter and import torch again; on a 2-core machine the second import
costs as much as the first. While a phase runs a check that may import torch, `serving` keeps one interpreter
(`checks/probes/_probe_server.py`), and `run` hands it a probe: the server forks, the child runs the probe with
the probe's argv, cwd and environment, its stdout and stderr going straight into pipes this process reads, in a
session of its own that the deadline signals as it would a fresh probe's. The server imports torch once, where
some probe needs it (its doc says when): a probe asks with `preload`, and when the job's own code imports torch
(`torch_use`) and imports.smoke may run (every check: the server started before they are chosen; else a phase
that runs it), this process tells the server as it starts, so that the import runs while the checks are still
being chosen, as it did when every server imported torch at start-up.

A probe still gets a fresh process when the server cannot serve it as a fresh one would behave: its environment
differs in a variable that may be read at start-up, the server is not there (a remote target, a Python
without AF_UNIX, torch failed to import there), or the server did not take it in time.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import dfdoctor.checks.probes as _probes_pkg
from dfdoctor.agent.procfs import proc_cpu_s, proc_state
from dfdoctor.capture import DEFAULT_LIMIT, CappedBuffer
from dfdoctor.command import ProbeOutcome, kill_group, pump
from dfdoctor.torch_use import command_imports_torch
from dfdoctor.lazy_re import compile_later

SERVER = Path(_probes_pkg.__file__).resolve().parent / "_probe_server.py"
# Variables nothing reads before a probe's own work begins (CUDA, NCCL and the rendezvous read them when they
# start, long after `import torch`): a probe may set them differently from the server's environment and still be
# a fork of it. Any other difference (PYTHONPATH, LD_PRELOAD, OMP_NUM_THREADS, TORCH_LOGS, a user's variable
# that their module-level code reads...) gets a fresh interpreter.
LAZY_NAMES = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "RANK", "LOCAL_RANK",
              "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "TORCH_SYMM_MEM_DISABLE_MULTICAST", "PYTHONDONTWRITEBYTECODE"}
LAZY_PREFIXES = ("NCCL_", "NVSHMEM_", "TORCHELASTIC_", "DFDOCTOR_")
_FRAME = compile_later(r'^ +File "(.*)", line (?:\d+|\?\?\?) in ')  # faulthandler's frame line
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes
# dfdoctor's probes that never import torch: the server saves them nothing but a bare interpreter's start (tens of
# milliseconds), and while it is still importing torch they would wait for it. They start fresh, beside it.
WITHOUT_TORCH = frozenset({"deps_probe.py", "log_probe.py", "leftovers_probe.py", "text_files_probe.py"})
# The check whose probe imports the job's own modules, torch with them where the job's do: the one the server is
# told to import torch for before any probe asks (the others that need it ask with `preload`, or import it in their
# probe only on a GPU build: cuda.init on a CPU-only torch never does).
JOB_IMPORTS = "imports.smoke"


@dataclass(frozen=True)
class Server:
    """A running server: its pid (also its process group), its socket, and the environment it started with."""

    pid: int
    socket_path: str
    env: dict[str, str]
    python: str


_active: Optional[Server] = None  # set before the check workers fork: they inherit it
# A server started before its phase's checks were chosen (`early`): (process, folder, socket, env, python)
_early: Optional[tuple[subprocess.Popen, str, str, dict[str, str], str]] = None


def _wanted_here(ctx) -> bool:
    """Whether a server can serve this context's probes at all (local, not switched off)."""
    return ctx.target.runs_here and os.environ.get("DFDOCTOR_PROBE_SERVER") != "0"  # the escape hatch: every probe fresh


def _spawn(ctx, job_imports: bool = True) -> tuple[Optional[subprocess.Popen], str, str, dict[str, str]]:
    """Start a server for the training interpreter (None when it cannot start: each probe says so itself);
    `job_imports`: a check of the phase imports the job's modules (`JOB_IMPORTS`), so torch, where they import it,
    is worth importing at once."""
    folder = tempfile.mkdtemp(prefix="dfdoctor-probes-")
    path = os.path.join(folder, "s")
    env = {**ctx.env, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = None
    if len(path) <= MAX_SOCKET_PATH:
        try:
            proc = subprocess.Popen([ctx.python, str(SERVER), path], cwd=ctx.cwd, env=env, start_new_session=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:
            proc = None
    if proc is not None and job_imports and _job_imports_torch(ctx):
        with contextlib.suppress(OSError):  # a server already gone: its probes start fresh
            os.write(proc.stdin.fileno(), b"torch\n")  # unbuffered: nothing is left for close() to flush
    return proc, folder, path, env


def _job_imports_torch(ctx) -> bool:
    """Whether the job's module level imports torch (imports.smoke will ask the server for it), from its command's
    words: this runs before the checks' modules are imported, and takes none of them."""
    try:
        return command_imports_torch(ctx.command or (), Path(ctx.cwd))
    except (OSError, ValueError):  # a folder that cannot be read: the probe asks when it comes
        return False


def _stop(proc: Optional[subprocess.Popen], folder: str, path: str, *, at_once: bool = False) -> None:
    """End a server and what it forked (`at_once`: without waiting for it to leave by itself, as one still
    importing torch would not), and remove its socket and folder."""
    if proc is not None:
        proc.stdin.close()  # its signal to kill what it forked and leave
        try:
            proc.wait(timeout=0 if at_once else 2.0)
        except subprocess.TimeoutExpired:
            pass
        kill_group(proc.pid)
        proc.wait()
    for leftover in (path, folder):
        with contextlib.suppress(OSError):
            os.unlink(leftover) if leftover == path else os.rmdir(leftover)


@contextlib.contextmanager
def early(ctx, wanted: bool) -> Iterator[None]:
    """Start the server (when `wanted`) for the phase run inside the block before its checks are discovered and
    chosen: importing torch there is most of a local `check`'s time, and nothing else need come first (0.1 s of
    checks' imports and choosing ran before it, a third of dfdoctor's own cost over `import torch`, round 9).
    `serving` takes it over, or stops it when no chosen check imports torch; one that nothing took over (the
    block raised first) is stopped on the way out."""
    global _early
    if wanted and _early is None and _active is None and _wanted_here(ctx):
        proc, folder, path, env = _spawn(ctx)
        _early = (proc, folder, path, env, ctx.python) if proc is not None else None
        if proc is None:
            _stop(None, folder, path)
    try:
        yield
    finally:
        left, _early = _early, None
        if left is not None:
            _stop(left[0], left[1], left[2], at_once=True)


@contextlib.contextmanager
def serving(ctx, wanted: bool, job_imports: bool = True) -> Iterator[Optional[Server]]:
    """Keep a probe server for the training interpreter while the block runs (when `wanted` and local).
    `job_imports`: the phase runs `JOB_IMPORTS`; without it a server started here imports torch only when a probe
    asks (`check --only cuda.init` of a torch job on a CPU-only torch imported it for nothing: ~1.2 CPU-s)."""
    global _active, _early
    early, _early = _early, None
    if early is not None and not (wanted and _active is None and _wanted_here(ctx) and early[4] == ctx.python
                                  and early[3] == {**ctx.env, "PYTHONDONTWRITEBYTECODE": "1"}):
        _stop(early[0], early[1], early[2], at_once=True)  # started for a phase that did not want it after all
        early = None
    if early is None and (not wanted or _active is not None or not _wanted_here(ctx)):
        yield None
        return
    proc, folder, path, env = early[:4] if early is not None else _spawn(ctx, job_imports)
    try:
        if proc is not None:
            _active = Server(proc.pid, path, env, ctx.python)
        yield _active
    finally:
        _active = None
        _stop(proc, folder, path)


def serves(python: str, env: dict[str, str], script: str = "") -> bool:
    """Whether the active server should run the probe `script` of `python` with `env`: it can run it as a fresh
    process would, and the probe may import torch."""
    server = _active
    if server is None or python != server.python or os.path.basename(script) in WITHOUT_TORCH:
        return False
    changed = {k for k in set(env) | set(server.env) if env.get(k) != server.env.get(k)}
    return all(k in LAZY_NAMES or k.startswith(LAZY_PREFIXES) for k in changed)


def run(argv: Sequence[str], *, timeout: float, cwd: os.PathLike | str, env: dict[str, str],
        limit: int = DEFAULT_LIMIT, stack_signal: Optional[int] = signal.SIGUSR1,
        preload: Sequence[str] = ()) -> Optional[ProbeOutcome]:
    """Run a probe script (`argv[0]`) in a fork of the server; None when the server did not take it (the caller
    then runs it fresh, with what is left of its time). The server is given a third of the time to take it, and
    up to two thirds while it is seen working (`_Patience`): it is still importing torch, and a torch that hangs
    there is the fresh probe's to find and show. `preload`:
    modules the server imports before this fork, kept for the later ones (checks/probes/_probe_server.py says
    when it does)."""
    server = _active
    if server is None:
        return None
    start = time.monotonic()
    patience = _Patience(server.pid, start, timeout)
    conn = _connect(server, patience)
    if conn is None:
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        conn.settimeout(_Patience.LOOK_EVERY)
        request = json.dumps({"argv": [str(a) for a in argv], "cwd": str(cwd), "env": env,
                              **({"preload": list(preload)} if preload else {})}).encode() + b"\n"
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", (out_w, err_w)).tobytes())])
        reply, said = _read_line(conn, patience)
        pid = int(json.loads(reply)["pid"]) if reply else None
    except (OSError, ValueError, KeyError, TypeError):
        pid = None
    finally:
        os.close(out_w)  # the child has its own copies
        os.close(err_w)
    if pid is None:
        conn.close()
        os.close(out_r)
        os.close(err_r)
        return None
    return _watch(conn, pid, out_r, err_r, [server.python, *map(str, argv)], start, timeout, limit, stack_signal,
                  said)


class _Patience:
    """How long a probe waits for the server to take it: a third of the probe's time, then on, up to two thirds,
    while the server is seen working (its CPU time grew in the last LOOK_EVERY seconds). On a loaded machine the
    server may still be importing torch (and compile.race's torch._dynamo) after a third: a fresh probe then
    imported them again from the start, 2-2.5 CPU-s more, and was no sooner done (round 21: `check --only
    compile.race` at load 11-12, 3 checks of 3). A server that does not move (a torch import that hangs on a
    lock, a socket) leaves the fresh probe two thirds of the time to find and show it, as before; one that spins
    for ever, a third."""

    LOOK_EVERY = 1.0

    def __init__(self, pid: int, start: float, timeout: float) -> None:
        self.pid = pid
        self.first, self.last = start + max(0.1, timeout / 3), start + max(0.1, 2 * timeout / 3)
        self.seen_at, self.cpu = start, proc_cpu_s(pid)

    def over(self) -> bool:
        """Whether to stop waiting for the server now."""
        now = time.monotonic()
        if now < self.first:
            return not _alive(self.pid)
        if now >= self.last or not _alive(self.pid):
            return True
        if now - self.seen_at >= self.LOOK_EVERY:
            cpu = proc_cpu_s(self.pid)
            if cpu is None or self.cpu is None or cpu <= self.cpu:
                return True
            self.seen_at, self.cpu = now, cpu
        return False


def _connect(server: Server, patience: _Patience) -> Optional[socket.socket]:
    """A connection to the server, waiting for it to listen while it lives (its interpreter is starting)."""
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(server.socket_path)
            return conn
        except OSError:
            conn.close()
        if patience.over():
            return None
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Whether the process is there and not a zombie: its state in /proc, as psutil read it (psutil's import was
    0.04 G of a `check`'s 0.68 G instructions, and a check needs nothing else of it)."""
    return proc_state(pid) not in (None, "Z")


def _read_line(conn: socket.socket, patience: _Patience) -> tuple[bytes, bytes]:
    """The server's first line (the probe's pid), and what came after it: a probe that ended at once has its exit
    status sent before a loaded machine gives this process the time to read the pid, and one read takes both.
    Read while `patience` lasts (the socket's timeout is how often it is asked)."""
    data = b""
    while b"\n" not in data:
        try:
            chunk = conn.recv(4096)
        except socket.timeout:
            if patience.over():
                raise
            continue
        if not chunk:
            break
        data += chunk
    line, newline, rest = data.partition(b"\n")
    return line + newline, rest


def _watch(conn: socket.socket, pid: int, out_r: int, err_r: int, argv: list[str], start: float, timeout: float,
           limit: int, stack_signal: Optional[int], said_before: bytes = b"") -> ProbeOutcome:
    """Read the probe's output until it ends (the server's last word is its exit status) or its deadline;
    `said_before`: what the server said after the pid, read with it."""
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    said = bytearray(said_before)
    sel = selectors.DefaultSelector()
    conn.setblocking(False)
    sel.register(out_r, selectors.EVENT_READ, out)
    sel.register(err_r, selectors.EVENT_READ, err)
    sel.register(conn, selectors.EVENT_READ, None)

    def from_server(key) -> None:
        try:
            chunk = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        said.extend(chunk)
        if not chunk:
            sel.unregister(conn)

    try:
        timed_out = pump(sel, pid, start + timeout, stack_signal, on_other=from_server)
    finally:
        sel.close()
        kill_group(pid)  # nothing the probe started may outlive it
        conn.close()
        os.close(out_r)
        os.close(err_r)
    rc = None
    for line in bytes(said).splitlines():
        with contextlib.suppress(ValueError, TypeError):
            rc = json.loads(line).get("rc", rc)
    return ProbeOutcome(argv, rc, out.text(), without_server_frames(err.text()), time.monotonic() - start,
                        timed_out=timed_out, extra={"probe_server": True})


def without_server_frames(stderr: str) -> str:
    """The probe's stderr with the fork's own outer frames left out of each thread's faulthandler stack.

    A forked probe runs inside the server's `run_child` through `runpy.run_path`, so a stack dumped at its deadline
    (cuda.init's and imports.smoke's hang evidence) goes on below the probe's `<module>` with frames a fresh probe
    does not have. Only a stack whose outermost frame is the server's is cut, and only the server's and runpy's
    frames at its end: the first frame that is neither (the probe's `<module>`) and all above it stay."""
    lines = stderr.splitlines(keepends=True)
    keep = [True] * len(lines)
    i = 0
    while i < len(lines):
        end = i
        while end < len(lines) and _frame_file(lines[end]) is not None:
            end += 1
        if end > i and _frame_file(lines[end - 1]) == str(SERVER):
            last = end - 1
            while last >= i and _ours(_frame_file(lines[last])):
                keep[last] = False
                last -= 1
        i = end + 1 if end > i else i + 1
    return "".join(line for line, k in zip(lines, keep) if k)


def _frame_file(line: str) -> Optional[str]:
    """The file of a faulthandler frame line (`  File "x.py", line 3 in f`), None for any other line."""
    m = _FRAME.match(line)
    return m.group(1) if m else None


def _ours(path: Optional[str]) -> bool:
    """The server's file, or runpy's (`<frozen runpy>` from Python 3.11, runpy.py before), through which it runs."""
    return path is not None and (path == str(SERVER) or path == "<frozen runpy>" or os.path.basename(path) == "runpy.py")
