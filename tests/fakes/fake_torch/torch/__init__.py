"""A stand-in `torch` whose CUDA misbehaves on demand (FAKE_TORCH_MODE), for testing cuda.init without a GPU."""

import os
import subprocess
import sys
import time
import types

__version__ = "2.99.0+cu130"
__file__ = __file__

version = types.SimpleNamespace(cuda="13.0", hip=None)
MODE = os.environ.get("FAKE_TORCH_MODE", "hang")


def _is_available() -> bool:
    """A CUDA build that believes one GPU is there."""
    return True


def _device_count() -> int:
    """One GPU, as far as this fake knows."""
    return 1


def _init() -> None:
    """Misbehave as FAKE_TORCH_MODE says."""
    if MODE == "init-error":
        raise RuntimeError("CUDA error: system not yet initialized (error 802)\nCUDA kernel errors might be "
                           "asynchronously reported")
    # hang: a helper process (as a driver might spawn) plus a block that never returns
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pidfile = os.environ.get("FAKE_TORCH_CHILD_PIDFILE")
    if pidfile:
        with open(pidfile, "w") as f:
            f.write(str(child.pid))
    while True:
        time.sleep(3600)


cuda = types.SimpleNamespace(is_available=_is_available, device_count=_device_count, init=_init,
                             get_arch_list=lambda: ["sm_80", "sm_90"])
