"""Whole numbers as the tools we read write them: ASCII digits only.

`str.isdigit()` is true of '²' (which `int()` refuses: a crash) and of other scripts' digits (which `int()` reads,
though no Slurm, torchrun or shell option does). Text from a user's script, a command line or a job's output is
read through these, so a hostile or odd value is "not a number", never a traceback.
"""

from __future__ import annotations

from typing import Optional


def is_whole(text: object) -> bool:
    """True for a non-empty string of ASCII digits."""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def whole(text: object, default: Optional[int] = None) -> Optional[int]:
    """The number `text` spells in ASCII digits, else `default`."""
    return int(text) if is_whole(text) else default  # type: ignore[arg-type]


def size_words(kib: int) -> str:
    """A size given in KiB as a person reads it: `11.8 GiB`, `64 MiB`, `512 KiB` (never `12341892`)."""
    for unit, scale in (("TiB", 1 << 30), ("GiB", 1 << 20), ("MiB", 1 << 10)):
        if kib >= scale:
            n = kib / scale
            return f"{n:.0f} {unit}" if n >= 100 or n == int(n) else f"{n:.1f} {unit}"
    return f"{kib} KiB"
