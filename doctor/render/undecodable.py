"""Bytes that are not UTF-8 in a path or an argument: Python keeps them as lone surrogates (U+DC80-U+DCFF), which
no UTF-8 file or terminal can take. A report shows each as `\\xNN`, the way the text report shows control
characters, before any format renders it: every format stays valid UTF-8 (and JSON stays JSON)."""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any

from dfdoctor.lazy_re import compile_later

_LONE = compile_later("[\ud800-\udfff]")


def _shown(m: "re.Match[str]") -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def shown(s: str) -> str:
    """`s` with every lone surrogate written out as `\\xNN` (a byte that was not UTF-8) or `\\uNNNN`."""
    return _LONE.sub(_shown, s) if isinstance(s, str) else s


def shown_all(obj: Any) -> Any:
    """A copy of a report (or any part of one) with `shown` applied to every string in it, keys included."""
    if isinstance(obj, enum.Enum):
        return obj
    if isinstance(obj, str):
        return shown(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(shown_all(x) for x in obj)
    if isinstance(obj, dict):
        return {shown_all(k): shown_all(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: shown_all(getattr(obj, f.name))
                                           for f in dataclasses.fields(obj) if f.init})
    return obj
