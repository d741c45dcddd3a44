"""Writing files without harming the user's: atomic replacement through a temp file no one can predict, and
the test that an output would not land on a file the user named for something else."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from dfdoctor.errors import UsageError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str, *, private: bool = False) -> None:
    """Replace `path` only once the new content is complete, so a crash never leaves half a file.

    The temp file is made by mkstemp beside `path` (a planted symlink cannot redirect it) and removed on any
    failure. A device, FIFO or /dev/stdout is written through, never replaced; a symlink's target is written,
    and the link kept. The new file gets 0600 when `private`, else the mode of the file it replaces (or what
    the umask allows a new file).
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    try:
        mode = 0o600 if private else path.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".dfdoctor-tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _identity(path: Path) -> tuple[str, Optional[tuple[int, int]]]:
    """Where a path really leads: its resolved name, and (device, inode) when it exists (hard links)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        return real, (st.st_dev, st.st_ino)
    except OSError:
        return real, None


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:
        return False


def guard_outputs(outputs: Iterable[str], files: Iterable[tuple[str, Path]] = (),
                  folders: Iterable[tuple[str, Path]] = ()) -> None:
    """Refuse (UsageError, exit 2) an --output that would overwrite one of the user's `files` (named, e.g.
    "--log"), land inside one of `folders` (a run folder), or be the same file as another --output, whatever
    symlinks, `..` or hard links lead there."""
    guarded = [(what, *_identity(p)) for what, p in files]
    dirs = [(what, os.path.realpath(p)) for what, p in folders]
    seen: list[tuple[str, str, Optional[tuple[int, int]]]] = []
    for out in outputs:
        real, ident = _identity(Path(out))
        for what, g_real, g_ident in guarded + seen:
            if real == g_real or (ident is not None and ident == g_ident):
                raise UsageError(f"--output {out} is the same file as {what}: it would be overwritten; "
                                 "choose another --output")
        for what, d in dirs:
            if _inside(real, d):
                raise UsageError(f"--output {out} is inside {what} ({d}), which dfdoctor keeps for itself; "
                                 "choose another --output")
        seen.append((f"--output {out}", real, ident))
