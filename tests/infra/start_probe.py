"""A probe for the relay's tests (tests/test_relay.py): it says how it was started, everything a fresh `python
SCRIPT` has and a probe the relay forks must have too (agent/probe_fork.py). `--crash` dies of SIGSEGV after its
answer; `--hang TOKEN` hangs holding the file `hanging-TOKEN` open beside it (a forked probe's command line is the
relay's: that file names it); otherwise it ends with `sys.exit(3)` and a word on stderr."""

import sys

MODULES, PATH, META = sorted(sys.modules), list(sys.path), [type(f).__name__ for f in sys.meta_path]

import atexit  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

from _probe_support import answer, install_stack_dump  # noqa: E402  (shipped beside it)


def _signals() -> dict:
    out = {}
    for sig in signal.valid_signals():
        try:
            out[str(int(sig))] = repr(signal.getsignal(sig))
        except (ValueError, OSError):
            continue
    return out


install_stack_dump()
answer({"modules": MODULES, "path0_is_here": PATH[0] == os.path.dirname(os.path.realpath(__file__)),
        "path_rest": PATH[1:], "meta_path": META, "argv": [os.path.basename(sys.argv[0])] + sys.argv[1:],
        "name": __name__, "file": os.path.basename(__file__), "cwd": os.getcwd(), "lazy": os.environ.get("NCCL_DFD_TEST"), "var": os.environ.get("DFD_TEST_VAR"),
        "bytecode_written": not sys.dont_write_bytecode, "session_leader": os.getsid(0) == os.getpid(),
        "group_leader": os.getpgid(0) == os.getpid(), "fds": sorted(int(n) for n in os.listdir("/proc/self/fd")),
        "stdin": os.read(0, 10).decode(), "signals": _signals(), "atexit": atexit._ncallbacks(),
        "executable": sys.executable, "relay_s_command_line": " relay " in open("/proc/self/cmdline").read()
        .replace("\0", " ")})
if "--crash" in sys.argv:
    os.kill(os.getpid(), signal.SIGSEGV)
if "--hang" in sys.argv:
    held = open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "hanging-" + sys.argv[sys.argv.index("--hang") + 1]), "w")
    time.sleep(300)
sys.stderr.write("start probe ends\n")
sys.exit(3)
