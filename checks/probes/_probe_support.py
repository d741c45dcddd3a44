"""Helpers a probe script may import (standard library only: it runs in the user's interpreter)."""

import faulthandler
import json
import os
import signal
import sys


def install_stack_dump() -> None:
    """Print every thread's stack to stderr when dfdoctor sends SIGUSR1 at the probe's deadline."""
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def request():
    """The JSON request dfdoctor handed over in the file named by $DFDOCTOR_PROBE_IN: a request of any size (2,500
    pinned requirements) travels in a file, never as one argv word, which the kernel caps at 128 KiB."""
    with open(os.environ["DFDOCTOR_PROBE_IN"]) as f:
        return json.load(f)


def new_file(folder: str, prefix: str):
    """(fd, path) of a new file in `folder` named `prefix` and 16 random hex digits, created by this open alone
    (O_EXCL, mode 0600), as tempfile.mkstemp makes one and with the same errors: a planted symlink cannot redirect
    it. Not tempfile itself: its import (random, hashlib, shutil, weakref) was 13 M instructions of each probe's
    start on Debian's python3.11, where a bare `python3 -S` is 21 M."""
    path = os.path.join(folder, prefix + os.urandom(8).hex())
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o600), path


def answer(payload: dict) -> None:
    """Write the probe's JSON answer where dfdoctor reads it."""
    path = os.environ.get("DFDOCTOR_PROBE_OUT")
    if not path:
        print(json.dumps(payload))
        return
    # a name no one can guess beside the answer file: a planted symlink cannot redirect the write
    fd, tmp = new_file(os.path.dirname(path) or ".", os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
