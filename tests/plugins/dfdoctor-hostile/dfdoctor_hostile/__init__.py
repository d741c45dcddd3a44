"""Hostile checks: each misbehaves in one way a real check might. Pids go to $HOSTILE_PIDS for the tests."""

import os
import subprocess
import sys
import time

from dfdoctor import check, ok


def _note_pid(pid: int) -> None:
    path = os.environ.get("HOSTILE_PIDS")
    if path:
        with open(path, "a") as f:
            f.write(f"{pid}\n")


@check("hostile.hang", title="hangs forever in Python", timeout=2)
def hang(ctx):
    _note_pid(os.getpid())
    while True:
        time.sleep(1)


@check("hostile.raise", title="raises", timeout=5)
def raises(ctx):
    raise ValueError("hostile check blew up on purpose")


@check("hostile.segfault", title="its subprocess segfaults", timeout=10)
def segfault(ctx):
    subprocess.run([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"], check=True)
    yield ok("unreachable")


@check("hostile.self-segv", title="the check process itself segfaults", timeout=10)
def self_segv(ctx):
    import ctypes
    ctypes.string_at(0)


@check("hostile.flood", title="prints 50 MB", timeout=20)
def flood(ctx):
    chunk = "x" * 1023 + "\n"
    for _ in range(50 * 1024):
        sys.stdout.write(chunk)
    sys.stdout.flush()
    yield ok("flooded")


@check("hostile.daemon", title="leaves a daemon behind", timeout=5)
def daemon(ctx):
    proc = subprocess.Popen([sys.executable, "-c",
                             "import os,sys,time\n"
                             "if os.fork(): os._exit(0)\n"
                             "os.setsid()\n"
                             "open(sys.argv[1],'a').write(f'{os.getpid()}\\n')\n"
                             "time.sleep(1000)", os.environ.get("HOSTILE_PIDS", "/dev/null")],
                            start_new_session=True)
    proc.wait()
    time.sleep(0.3)
    yield ok("left a daemon")


@check("hostile.hang-child", title="waits forever on a child in its own session", timeout=2)
def hang_child(ctx):
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    _note_pid(proc.pid)
    proc.wait()
