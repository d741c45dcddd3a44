"""An interpreter of this test run's venv that cannot find py-spy: a view of the venv (its pyvenv.cfg and lib/,
a bin/ with python3 alone), so that `python3 -m dfdoctor` runs the installed dfdoctor as a machine without py-spy
(or one where py-spy may not attach) would: stacks only from the kernel's view."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest


def python_without_pyspy(where: Path) -> Path:
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix) or not (venv / "pyvenv.cfg").exists():
        pytest.skip("the tests do not run in a venv (make venv): no view of it can be made")
    view = where / "venv-without-py-spy"
    (view / "bin").mkdir(parents=True)
    (view / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    (view / "lib").symlink_to(venv / "lib")
    (view / "bin" / "python3").symlink_to(Path(sys.executable))
    return view / "bin" / "python3"
