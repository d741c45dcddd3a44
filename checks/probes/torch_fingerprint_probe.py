"""What identifies the training interpreter's torch without importing it: the interpreter, its version, where
torch would be imported from and when that file last changed (a reinstall or upgrade changes it).

Standard library only; `importlib.util.find_spec` locates a top-level package without running it.
"""

import importlib.util
import os
import sys

from _probe_support import answer

spec = importlib.util.find_spec("torch")
origin = spec.origin if spec else None
try:
    mtime = os.stat(origin).st_mtime_ns if origin else None
except OSError:
    mtime = None
answer({"executable": os.path.realpath(sys.executable), "version": sys.version, "torch_origin": origin,
        "torch_mtime_ns": mtime,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("TORCH", "PYTORCH"))}})
