"""Seeing which processes import torch, for real: a sitecustomize on PYTHONPATH that leaves a file named by its
pid in a folder whenever its interpreter imports torch (every Python dfdoctor starts with the job's environment:
the probe server, its forks, fresh probes). And a torch whose build cannot be read from its files: the real one,
imported through a package folder without its version.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_HOOK = """
import os, sys


class _MarkTorch:
    # torch's module runs (its loader's exec_module): an import, not a look-up (importlib.util.find_spec)
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        spec = next((s for s in (getattr(f, "find_spec", lambda *a: None)(name, path, target)
                                 for f in sys.meta_path if f is not self) if s is not None), None)
        if spec is not None and spec.loader is not None:
            spec.loader = _Marking(spec.loader)
        return spec


class _Marking:
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        open(os.path.join(os.environ["TORCH_IMPORT_MARKS"], str(os.getpid())), "w").close()
        self.real.exec_module(module)


sys.meta_path.insert(0, _MarkTorch())
"""


def marking(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Environment entries that make every Python started with them mark its torch imports, and the marks' folder."""
    site, marks = tmp_path / "mark-site", tmp_path / "torch-marks"
    site.mkdir()
    marks.mkdir()
    (site / "sitecustomize.py").write_text(_HOOK)
    return {"PYTHONPATH": str(site), "TORCH_IMPORT_MARKS": str(marks)}, marks


def _torch_build():
    """checks/probes/_torch_build.py: the build read from torch's version.py, without importing torch."""
    probes = str(Path(__file__).resolve().parents[2] / "checks" / "probes")
    sys.path.insert(0, probes)
    try:
        import _torch_build
    finally:
        sys.path.remove(probes)
    return _torch_build


def cpu_only_torch() -> dict:
    """This interpreter's torch build, read from its version.py; the test is skipped unless it is a CPU-only one."""
    tb = _torch_build()
    build = tb.read()
    if not tb.cpu_only(build):
        pytest.skip(f"not a CPU-only torch build as its version.py says ({build})")
    return build


def rocm_torch() -> bool:
    """Whether this interpreter's torch is a ROCm build (torch.version.hip), read from its version.py: importing
    torch into the test's own process cost its xdist worker ~2 CPU-s. Imported only where that file cannot be
    read."""
    build = _torch_build().read()
    if build is None:
        import torch
        return bool(getattr(torch.version, "hip", None))
    return bool(build["hip"])


def torch_version() -> str:
    """This interpreter's torch.__version__, read from the version.py it is set from (torch/__init__.py imports it
    from there): the import into the test's own process cost its xdist worker ~1.5-2 CPU-s. Imported only where
    that file cannot be read."""
    build = _torch_build().read()
    if build is None:
        import torch
        return str(torch.__version__)
    return build["version"]


def torch_cuda() -> str:
    """This interpreter's torch.version.cuda ('' for none), read from its version.py as `torch_version` reads the
    version: a test that ran `python -c "import torch; print(torch.version.cuda)"` for it paid ~1.4 CPU-s. Imported
    only where that file cannot be read."""
    build = _torch_build().read()
    if build is None:
        import torch
        return str(torch.version.cuda or "")
    return str(build["cuda"] or "")


def unreadable_build(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH whose `torch` is the installed one, with no version.py beside its __init__.py."""
    real = Path(importlib.util.find_spec("torch").origin)
    shim = tmp_path / "shim" / "torch"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(f"__path__ = [{str(real.parent)!r}]\n__file__ = {str(real)!r}\n"
                                      "exec(compile(open(__file__).read(), __file__, 'exec'))\n")
    return shim.parent
