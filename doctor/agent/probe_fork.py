"""A probe that the relay carries, run as a fork of the python that carries it instead of a fresh interpreter
(issue 45, round 19: a checked launch's gate ran four probes at once on the target, each a fresh python's start,
half of each probe's CPU on a 2-core target; each of those CPU-seconds competed with whatever else ran there).

Each probe keeps what a fresh one had: a process and a session of its own (forked by the probe's bootstrap, which
keeps its deadline and kills its group as before), its stdin on /dev/null, no other descriptor, and the start a
fresh `python SCRIPT ARGS` would have had: the modules this interpreter held before the agent's loader ran (the
loader's FRESH_START; everything imported since is forgotten, so a probe imports what it imports itself, and
finds it where a fresh one would), sys.path with the script's folder first, the argv, the environment, the signal
dispositions, no atexit handler of ours, `__main__` the script; its end is an interpreter's (threads joined,
atexit handlers run, streams flushed, the same exit status, a traceback printed as python prints it).

Only where nothing a fresh interpreter reads at its start would differ: the interpreter is this one (the request
names none), the loader recorded its start, and the probe's environment differs from this process's in variables
read later only (LAZY_NAMES, LAZY_PREFIXES: those doctor/probe_server.py lets a fork of its server take too).
Anything else, or DFDOCTOR_PROBE_FORK=0, starts a fresh interpreter as before (`can_fork`).
"""

import os
import signal
import sys
import threading

# Variables nothing reads before a probe's own work begins (CUDA, NCCL and the rendezvous read them when they start);
# PYTHONDONTWRITEBYTECODE is given to the fork as a fresh start reads it (sys.dont_write_bytecode).
LAZY_NAMES = frozenset(["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "RANK", "LOCAL_RANK",
                        "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "PYTHONDONTWRITEBYTECODE"])
LAZY_PREFIXES = ("NCCL_", "NVSHMEM_", "TORCHELASTIC_", "DFDOCTOR_")
OFF = "DFDOCTOR_PROBE_FORK"  # "0" in the probe's environment: a fresh interpreter, as before


def fresh_start():
    """What the agent's loader recorded of this interpreter before anything of the agent was imported
    (modules, sys.path, sys.meta_path), or None."""
    return getattr(sys.modules.get("__main__"), "FRESH_START", None)


def can_fork(req, env):
    """Whether the probe of request `req`, given environment `env`, starts as a fork of this python."""
    if req.get("python") or not hasattr(os, "fork") or fresh_start() is None or env.get(OFF) == "0":
        return False
    changed = [k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)]
    return all(k in LAZY_NAMES or k.startswith(LAZY_PREFIXES) for k in changed)


class Forked(object):
    """The forked probe as the bootstrap uses a Popen: its pid (its session's too) and `wait`, from any thread."""

    def __init__(self, pid):
        self.pid, self.returncode, self.lock = pid, None, threading.Lock()

    def wait(self):
        with self.lock:
            if self.returncode is None:
                status = os.waitpid(self.pid, 0)[1]
                self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode


def start(argv, cwd, env):
    """Fork the probe `argv` ([script, arg...]) in `cwd` (None: this one) with environment `env`; it leads a
    session of its own before this returns (the deadline signals that group). Called before any other thread."""
    import atexit
    import types
    from importlib.machinery import SourceFileLoader  # held across the forgetting of every module of ours

    held = (atexit, types.ModuleType, SourceFileLoader)
    ready_r, ready_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            os.close(ready_r)
            status = become(argv, cwd, env, ready_w, held)
        finally:
            os._exit(status)
    os.close(ready_w)
    while os.read(ready_r, 1):  # nothing comes: the end of the pipe says its session is made (or it died)
        pass
    os.close(ready_r)
    return Forked(pid)


def become(argv, cwd, env, ready_w, held):
    """In the fork: the probe's process as a fresh interpreter would start it; its exit status."""
    os.setsid()
    os.close(ready_w)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    close_fds()  # as Popen's close_fds: the other probes' pipes, the relay's, its session's
    if cwd:
        os.chdir(cwd)
    for name in [k for k in os.environ if k not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    fresh_signals()
    held[0]._clear()  # atexit: the handlers of this process are not the probe's
    return leave(run_main(argv, held), held[0])


def close_fds():
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        os.closerange(3, 1 << 16)
        return
    for fd in fds:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def fresh_signals():
    """The dispositions an exec'd python has: an ignored signal stays ignored (exec keeps it; SIGINT then gets
    no handler), a handled one is reset; then SIGINT raises KeyboardInterrupt, SIGPIPE and SIGXFSZ are ignored."""
    kinds = signal.valid_signals() if hasattr(signal, "valid_signals") else range(1, signal.NSIG)
    ignored_by_python = (signal.SIGPIPE, getattr(signal, "SIGXFSZ", signal.SIGPIPE))
    for sig in kinds:
        try:
            now = signal.getsignal(sig)
            if now == signal.SIG_IGN and sig not in ignored_by_python:
                continue
            want = signal.default_int_handler if sig == signal.SIGINT else \
                signal.SIG_IGN if sig in ignored_by_python else signal.SIG_DFL
            if now != want:
                signal.signal(sig, want)
        except (OSError, ValueError, RuntimeError):
            continue


def run_main(argv, held):
    """Forget what was imported since the loader's start, and run the script as `__main__`: its exit status
    (-SIGINT for a KeyboardInterrupt, which `leave` ends as python does)."""
    modules, path, meta_path = fresh_start()
    module_type, loader = held[1], held[2]
    script = argv[0]
    for name in [n for n in sys.modules if n not in modules]:
        del sys.modules[name]
    sys.meta_path[:] = meta_path
    sys.path_importer_cache.clear()
    # `python -c` put '' first (python -P / PYTHONSAFEPATH: nothing); a script's own folder takes its place
    rest = path if getattr(sys.flags, "safe_path", False) else path[1:]
    sys.path[:] = ([] if getattr(sys.flags, "safe_path", False) else
                   [os.path.dirname(os.path.realpath(script))]) + list(rest)
    sys.argv = list(argv)
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = [sys.executable] + list(argv)
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    main = module_type("__main__")
    main.__dict__.update(__file__=script, __cached__=None, __loader__=loader("__main__", script), __package__=None,
                         __spec__=None, __builtins__=sys.modules["builtins"])
    sys.modules["__main__"] = main
    try:
        with open(script, "rb") as f:
            code = compile(f.read(), script, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit as exc:
        return exit_status(exc.code)
    except BaseException:
        kind, exc, tb = sys.exc_info()
        sys.excepthook(kind, exc, tb.tb_next)  # from the script's own frame, as python prints it
        return -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def exit_status(code):
    """`sys.exit(code)`'s status, its words on stderr where it is not a number (as python does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:
        pass
    return 1


def leave(status, atexit):
    """An interpreter's end: threads joined, atexit handlers run, the streams flushed (status 120 where stdout
    could not take what was left); a KeyboardInterrupt ends it by SIGINT."""
    threading_now = sys.modules.get("threading")  # the probe's own import, if it made one
    if threading_now is not None:
        try:
            threading_now._shutdown()
        except BaseException:
            pass
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            if stream is sys.stdout:
                status = 120
    if status == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 130
    return status & 0xFF
