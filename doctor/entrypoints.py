"""The entry points of one group, read as `importlib.metadata.entry_points(group=...)` reads them, without importing
importlib.metadata: its import (email, zipfile, csv) and the parse of each distribution's METADATA for its name
were 0.02-0.03 of the ~0.15 CPU-s of every `check`, `launch` and `status` (issue 45, round 19), for a few small
text files. Where sys.path or sys.meta_path holds anything this reader does not read exactly as importlib.metadata
(a zip or egg on sys.path, a finder of its own that finds distributions, a file it cannot parse), it answers
None and the caller asks importlib.metadata itself.

What it reproduces (CPython 3.10-3.13: importlib.metadata): the `*.dist-info`/`*.egg-info` folders of each sys.path
entry in listing order, grouped by normalized name; the first distribution of a name on sys.path wins; each one's
entry_points.txt read by sections (`[group]`, then `name = value` lines; blank and `#` lines skipped); its name is
the `Name` header of its METADATA (else PKG-INFO); `load()` imports `module` and follows `:attr.attr`.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from typing import Any, Optional

from dfdoctor.lazy_re import compile_later

# importlib.metadata's EntryPoint.pattern
_PATTERN = compile_later(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_LINES = compile_later(r"\r\n|\r|\n")
_HEADER = compile_later(r"[\041-\071\073-\176]+")  # a header's name, as email's feedparser reads one


class _Unsure(Exception):
    """Something this reader would not read exactly as importlib.metadata does: ask it instead."""


class Distribution:
    """An installed distribution's folder; its name read from its metadata only when asked."""

    def __init__(self, path: str):
        self.path = path

    def read_text(self, name: str) -> Optional[str]:
        try:
            with open(os.path.join(self.path, name), encoding="utf-8") as f:
                return f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None

    @functools.cached_property
    def name(self) -> Optional[str]:
        """The first `Name:` header of its METADATA (else PKG-INFO), as email's parser gives it (compat32: the
        value less its leading blanks); a header this reading could take otherwise than email does: unsure."""
        # split where email's parser splits (str.splitlines also splits at \f, \x1c, \u2028, ...)
        lines = _LINES.split(self.read_text("METADATA") or self.read_text("PKG-INFO") or "")
        for i, line in enumerate(lines):
            if line == "":
                return None  # the headers end at the first empty line
            if line[0] in " \t":
                continue  # the next line of a folded header (not the name's: see below)
            key, colon, value = line.partition(":")
            if not colon or not _HEADER.fullmatch(key):
                raise _Unsure(f"a line that is no header in {self.path}'s metadata")
            if key.lower() == "name":
                if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
                    raise _Unsure(f"a folded Name in {self.path}'s metadata")
                return value.lstrip(" \t")
        return None


class EntryPoint:
    """One `name = value` of a distribution's group."""

    def __init__(self, name: str, value: str, group: str, dist: Distribution):
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self) -> Any:
        """The object it names: `module` imported, then each `.attr` of `:attr.attr` (importlib.metadata's way,
        its errors the same)."""
        match = _PATTERN.match(self.value)
        module = importlib.import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attrs, module)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _distributions() -> list[Distribution]:
    """Every distribution on sys.path, the first of each name, in importlib.metadata's order."""
    if any(getattr(f, "find_distributions", None) is not None for f in sys.meta_path
           if getattr(f, "__name__", "") != "PathFinder"):
        raise _Unsure("a finder of its own finds distributions")
    seen: set[str] = set()
    out: list[Distribution] = []
    for entry in sys.path:
        root = entry or "."
        if os.path.isfile(root):
            raise _Unsure(f"a zip on sys.path: {entry}")
        try:
            children = os.listdir(root)
        except OSError:
            continue
        if os.path.basename(entry).lower().endswith(".egg") and any(c.lower() == "egg-info" for c in children):
            raise _Unsure(f"an egg on sys.path: {entry}")
        infos: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                infos.setdefault(_normalized(low.rpartition(".")[0].partition("-")[0]), []).append(child)
        for name, found in infos.items():
            for child in found:
                if name not in seen:
                    seen.add(name)
                    out.append(Distribution(os.path.join(entry, child)))
    return out


def _entry_points(dist: Distribution, group: str) -> list[EntryPoint]:
    text = dist.read_text("entry_points.txt")
    section, out = None, []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:
            raise _Unsure(f"an entry point line without `=` in {dist.path}")
        name, value = line.split("=", 1)
        if section == group:
            out.append(EntryPoint(name.strip(), value.strip(), group, dist))
    return out


def of_group(group: str) -> Optional[list[EntryPoint]]:
    """The entry points of `group` in importlib.metadata's order; None where it must be asked itself."""
    try:
        found = [ep for dist in _distributions() for ep in _entry_points(dist, group)]
        for ep in found:
            ep.dist.name  # read now, where an unsure reading still falls back (cached for the caller)
        return found
    except (_Unsure, UnicodeDecodeError):
        return None
