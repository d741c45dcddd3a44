"""Helpers a probe script may import (standard library only: it runs in the user's interpreter)."""

import faulthandler
import json
import os
import signal
import sys
import tempfile


def install_stack_dump() -> None:
    """Print every thread's stack to stderr when dfdoctor sends SIGUSR1 at the probe's deadline."""
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def request():
    """The JSON request dfdoctor handed over in the file named by $DFDOCTOR_PROBE_IN: a request of any size (2,500
    pinned requirements) travels in a file, never as one argv word, which the kernel caps at 128 KiB."""
    with open(os.environ["DFDOCTOR_PROBE_IN"]) as f:
        return json.load(f)


def answer(payload: dict) -> None:
    """Write the probe's JSON answer where dfdoctor reads it."""
    path = os.environ.get("DFDOCTOR_PROBE_OUT")
    if not path:
        print(json.dumps(payload))
        return
    # a name no one can guess beside the answer file: a planted symlink cannot redirect the write
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=os.path.dirname(path) or ".")
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
