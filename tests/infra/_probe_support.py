"""Helpers a probe script may import (standard library only: it runs in the user's interpreter)."""

import faulthandler
import json
import os
import signal
import sys


def install_stack_dump() -> None:
    """Print every thread's stack to stderr when dfdoctor sends SIGUSR1 at the probe's deadline."""
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def answer(payload: dict) -> None:
    """Write the probe's JSON answer where dfdoctor reads it."""
    path = os.environ.get("DFDOCTOR_PROBE_OUT")
    if not path:
        print(json.dumps(payload))
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, path)
