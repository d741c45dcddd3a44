"""Where a project puts its own folders on sys.path at run time, so that `python src/train.py` can import `src.x`
although Python starts it with sys.path[0] = src/: a `sys.path.insert(0, ...)` or `rootutils.setup_root(__file__,
pythonpath=True)` in the script (or a module it imports), a `.project-root` marker such helpers look for, or a
`PYTHONPATH=` set by the project's Makefile, launcher scripts or .env.

imports.smoke runs what it safely can of that set-up before the imports; what it cannot run (a helper of the
project's own that computes the folder) leaves an import failing in the probe that works in the job. Such a
failure is only a reading of how the job would start, and a reading never blocks a launch: this module says
whether the failing module is the project's own and what in the project sets the path, in file:line terms.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from dfdoctor.lazy_re import compile_later

_UP = 4  # folders above the script searched for the module, as doctor/project looks for the project's root
_IN_CODE = compile_later(r"^[^#\n]*(sys\.path\.(?:insert|append|extend)\(|sys\.path\s*[+]=|setup_root\(|"
                         r"site\.addsitedir\()", re.M)
_IN_SHELL = compile_later(r"^[^#\n]*\bPYTHONPATH\s*[:?]?=", re.M)
_SHELL_FILES = ("Makefile", "makefile", ".env", "tox.ini", "setup.cfg", "pytest.ini")
_MARKERS = (".project-root",)


def provider(module: str, path0: Path) -> Optional[Path]:
    """The folder above sys.path[0] (up to _UP) that holds the module's top-level package or file, or None."""
    top = module.split(".")[0]
    p = path0
    for _ in range(_UP):
        if p.parent == p:
            break
        p = p.parent
        if (p / top / "__init__.py").is_file() or (p / f"{top}.py").is_file() or \
                ((p / top).is_dir() and any((p / top).glob("*.py"))):
            return p
    return None


def setup_line(files: list[Path], folder: Path) -> Optional[str]:
    """`file:line: text` of the first place that sets up the path at run time: the job's own Python files first,
    then the shell-side files and launcher scripts of `folder` (the module's folder, the project's root), then a
    marker file that root-finding helpers look for."""
    for f in files:
        hit = _first(f, _IN_CODE)
        if hit:
            return hit
    for f in [folder / n for n in _SHELL_FILES] + sorted(folder.glob("*.sh"))[:20]:
        hit = _first(f, _IN_SHELL)
        if hit:
            return hit
    marker = next((folder / m for m in _MARKERS if (folder / m).exists()), None)
    return f"{marker} (a root marker that root-finding helpers look for)" if marker else None


def _first(path: Path, rx: re.Pattern) -> Optional[str]:
    """The first line of a small text file that matches, as `file:line: text`."""
    try:
        if not path.is_file() or path.stat().st_size > 1_000_000:
            return None
        text = path.read_text(errors="replace")
    except OSError:
        return None
    m = rx.search(text)
    if m is None:
        return None
    line = text.count("\n", 0, m.start()) + 1
    return f"{path}:{line}: {text.splitlines()[line - 1].strip()}"
