"""A fork server in the training interpreter: torch imported once, each probe run in a fork of this process.

Standard library only, Python 3.6 syntax: it runs in the user's interpreter. dfdoctor starts it once per phase of
checks (`dfdoctor.probe_server`) with the job's environment and cwd, and it accepts requests on a Unix socket. A
request is one JSON line with the probe's argv, cwd and environment, and carries the write ends of the probe's
stdout and stderr pipes (SCM_RIGHTS). The server forks; the child becomes a session of its own (so dfdoctor can
signal its whole group, as it does a fresh probe), takes those pipes as fds 1 and 2 and runs the probe as
`__main__`. The server answers with the child's pid, then with its exit status.

It imports torch (the cost every torch-importing probe would otherwise pay again) only where some probe will:
at start-up when the build has CUDA or HIP or cannot be read (cuda.init's probe imports it then: `_torch_build`),
or when dfdoctor writes `torch` on its stdin (the job's own code imports it and imports.smoke may run: it will),
else before forking the first request that asks for it (`preload` naming torch or a module of it). A CPU-only
torch that no probe needs is never imported (round 19: a check of a job that does not use torch cost about a
CPU-second more for it).

A request may name more modules to import first (`preload`, compile.race's torch._dynamo: 1.1-1.3 s that each of
its runs paid again in its fork); the server imports them once, for that probe and every fork after it, with a
torch built for the CPU or CUDA, not ROCm (unproven there). A GPU driver started by them could not be inherited
by a fork: on an H200 (torch 2.11.0+cu130, bench/gpu_preload_check.py) the preload started no thread and left CUDA
uninitialised, and a fork made after it started CUDA and ran a compiled function; and the server checks it after
every import it makes, torch's own included (CUDA initialised: it serves nothing more). An import that fails
leaves the server serving nothing more: each probe then starts fresh, so none runs in what a failed import left
half-loaded; at start-up it exits at once (status 3) instead.

It stays single-threaded, so a fork never copies a lock another thread holds: every import happens in its one
thread, between requests. It never initialises CUDA (a probe that does so in a child is the first in its process
to do it). It exits when dfdoctor closes its stdin, killing what it forked. It leaves with os._exit: the
interpreter's teardown of torch took 0.3-0.5 s on a 2-core machine, and every `check` waited for it.
"""

import array
import atexit
import json
import os
import select
import signal
import socket
import sys
import threading

def preload():
    """Import torch, if this interpreter has it; False if the import failed (torch is then left alone)."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return True  # nothing to preload: probes still save the interpreter's start-up
    try:
        import torch  # noqa: F401  (the point of the server)
    except BaseException:
        return False
    return True


def torch_at_start():
    """Whether torch is sure to be imported by this phase's probes before any asks: a build with CUDA or HIP, or
    one whose build cannot be read, is imported by cuda.init's probe; a CPU-only build only where a probe needs it."""
    try:
        import _torch_build  # beside this file (not on the path under PYTHONSAFEPATH: then torch, as before)
    except ImportError:
        return True
    return not _torch_build.cpu_only(_torch_build.read())


_refusing = [False]  # an import failed, or left CUDA initialised: every request from now on is refused


def cuda_started():
    """Whether what the server imported initialised CUDA (seen not to on an H200, torch 2.11+cu130; a torch that
    does: no fork may inherit it)."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except BaseException:
        return True


def torch_now():
    """Import torch in the server now (asked by a request or by dfdoctor); False when the server must serve no
    more (this or an earlier import failed, or CUDA started)."""
    if not _refusing[0] and "torch" not in sys.modules and (not preload() or cuda_started()):
        _refusing[0] = True
    return not _refusing[0]


def preload_first(names):
    """Import what a request asks for before its fork (see the module's doc); False when the server must not
    serve it (this or an earlier import failed)."""
    names = [str(n) for n in names or ()]
    if _refusing[0] or (any(n == "torch" or n.startswith("torch.") for n in names) and not torch_now()):
        return False
    torch = sys.modules.get("torch")
    more = [n for n in names if n != "torch"]
    if not more or torch is None or getattr(torch.version, "hip", None):
        return True
    import importlib
    for name in more:
        try:
            importlib.import_module(name)
        except BaseException:
            _refusing[0] = True
            return False
    if cuda_started():
        _refusing[0] = True
        return False
    return True


def receive(conn):
    """One request: its JSON and the two fds it carries (stdout, stderr), or None for a caller that left."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        msg, ancdata, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(2 * fds.itemsize))
        for level, kind, blob in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(blob[:len(blob) - (len(blob) % fds.itemsize)])
        if not msg:
            for fd in fds:
                os.close(fd)
            return None
        data += msg
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data.decode("utf-8")), list(fds)


def leave_finalizers_to_the_server():
    """In the forked child: the weakref finalizers the server's objects carry are not the probe's to run at its
    exit. They are the server's teardown, which the server skips (os._exit), or act on what the server and
    the forks after this one still use; torch's are 134 (174 with torch._dynamo) `torch.library._del_library`
    unregistering operators from a dispatcher that os._exit discards a moment later: 30 ms of each 35 ms fork
    of a server that imported torch, page faults of copy-on-write memory. The probe's own finalizers, and
    any finalizer that runs because its object dies during the probe, run as in a fresh process."""
    import weakref
    for info in list(getattr(weakref.finalize, "_registry", {}).values()):
        info.atexit = False


def run_child(request, out_fd, err_fd, servers_fds):
    """In the forked child: become the probe, then leave as an interpreter leaves, without unwinding the server."""
    code = 70
    try:
        for fd in servers_fds:  # the listener and other probes' connections are the server's, not the probe's
            try:
                os.close(fd)
            except OSError:
                pass
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as a fresh Python has it
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        leave_finalizers_to_the_server()
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        code = 0
        import runpy
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                sys.stderr.write("%s\n" % (exc.code,))
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        # what a normal interpreter exit does: wait for non-daemon threads, run atexit handlers
        try:
            threading._shutdown()
        except BaseException:
            pass
        try:
            atexit._run_exitfuncs()
        except BaseException:
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code & 0xFF if code >= 0 else 1)


def status_of(raw):
    """A waitpid status as subprocess gives it: the exit code, or minus the signal's number."""
    if os.WIFSIGNALED(raw):
        return -os.WTERMSIG(raw)
    return os.WEXITSTATUS(raw)


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def send(conn, obj):
    try:
        conn.sendall((json.dumps(obj) + "\n").encode("utf-8"))
        return True
    except OSError:
        return False


def heard(stdin):
    """Read what dfdoctor said on stdin: False when it closed it (leave); `torch`: the job imports it, so import
    it now, before a probe asks (see the module's doc)."""
    said = os.read(stdin, 1024)
    if said and b"torch" in said:
        torch_now()
    return bool(said)


def serve(listener):
    """Accept requests and reap children until dfdoctor closes our stdin."""
    children = {}  # pid -> the connection that asked for it
    listener.setblocking(False)
    stdin = sys.stdin.fileno()
    watching = [listener, stdin]
    try:
        while True:
            readable, _, _ = select.select(watching + list(children.values()), [], [], 0.05)
            if stdin in readable and not heard(stdin):
                return
            if listener in readable:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    conn = None
                if conn is not None:
                    start(conn, children, [listener.fileno()] + [c.fileno() for c in children.values()])
            for pid, conn in list(children.items()):
                if conn in readable:  # the caller hung up (its deadline, or it is gone): end the probe
                    kill_group(pid)
            reap(children)
    finally:
        for pid in children:
            kill_group(pid)


def start(conn, children, servers_fds):
    conn.setblocking(True)
    conn.settimeout(5.0)
    try:
        got = receive(conn)
    except (OSError, ValueError):
        got = None
    if got is None:
        conn.close()
        return
    request, (out_fd, err_fd) = got
    if not preload_first(request.get("preload") or ()):
        os.close(out_fd)
        os.close(err_fd)
        conn.close()  # no pid: the caller starts the probe fresh
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        run_child(request, out_fd, err_fd, servers_fds + [conn.fileno()])
    os.close(out_fd)
    os.close(err_fd)
    conn.setblocking(False)
    if not send(conn, {"pid": pid}):
        kill_group(pid)
    children[pid] = conn


def reap(children):
    while children:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            conn.setblocking(True)
            conn.settimeout(2.0)
            send(conn, {"pid": pid, "rc": status_of(raw)})
            conn.close()


def main():
    path = sys.argv[1]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)  # callers queue here while torch imports
    if torch_at_start() and (not preload() or cuda_started()):
        sys.exit(3)
    serve(listener)
    # What it forked is gone; leave without tearing torch down (its modules' finalisers and the collection of
    # every object it made cost a noticeable fraction of a second, which `check` would wait out).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
