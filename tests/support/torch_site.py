"""Skip a test file where torch is not installed, without importing torch.

Every xdist worker imports every test file when it collects; a `pytest.importorskip("torch")` at a file's top made
each worker import torch (1.7 CPU-s and 300 MB here, six workers in CI) that only the processes the tests start use.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def torch_site() -> Path:
    """The site folder torch is installed in (found, not imported); the calling test file is skipped without it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("could not import 'torch': not installed", allow_module_level=True)
    return Path(spec.origin).resolve().parent.parent
