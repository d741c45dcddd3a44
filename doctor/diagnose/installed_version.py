"""The installed version of a package, read from the site-packages folder an error message names.

`cannot import name 'X' from 'pkg' (/venv/lib/python3.11/site-packages/pkg/__init__.py)`: the folder holds the
package's `*.dist-info` (its METADATA's Version, the top-level names it provides). Read from the files only, on
this machine (nothing is imported or run), so that a project's `pkg==VERSION` pin can be compared with what
is installed: a pin that disagrees establishes a version mismatch; nothing else does.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from dfdoctor.lazy_re import compile_later

_NAME = compile_later(r"^Name:\s*(\S+)", re.M)
_VERSION = compile_later(r"^Version:\s*(\S+)", re.M)
MAX_DIST_INFOS = 5000


def of_module(path: str, top: str) -> Optional[str]:
    """The version of the distribution that provides top-level module `top`, installed in the site-packages
    folder above `path` (None: no such folder here, or no dist-info says it provides `top`)."""
    for root_mark in ("/site-packages/", "/dist-packages/"):
        if root_mark in path:
            root = path.split(root_mark, 1)[0] + root_mark
            break
    else:
        return None
    try:
        infos = [e for e in os.listdir(root) if e.endswith(".dist-info")][:MAX_DIST_INFOS]
    except OSError:
        return None
    for info in infos:
        folder = os.path.join(root, info)
        if top in _top_levels(folder) or _canonical(info[:-len(".dist-info")].rsplit("-", 1)[0]) == _canonical(top):
            return _version(folder)
    return None


def _top_levels(folder: str) -> set[str]:
    try:
        with open(os.path.join(folder, "top_level.txt"), encoding="utf-8", errors="replace") as f:
            return {line.strip() for line in f if line.strip()}
    except OSError:
        return set()


def _version(folder: str) -> Optional[str]:
    try:
        with open(os.path.join(folder, "METADATA"), encoding="utf-8", errors="replace") as f:
            head = f.read(8192)
    except OSError:
        return None
    m = _VERSION.search(head)
    return m.group(1) if m else None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
