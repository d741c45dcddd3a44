"""Writing files without harming the user's: atomic replacement through a temp file no one can predict, and
the test that an output would not land on a file the user named for something else."""

from __future__ import annotations

import errno
import os
import select
import stat
from pathlib import Path
from typing import Iterable, Optional

from dfdoctor.agent.atomic import replace_atomically
from dfdoctor.errors import UsageError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str, *, private: bool = False) -> None:
    """Replace `path` only once the new content is complete, so a crash never leaves half a file.

    The temp file is made by mkstemp beside `path` (a planted symlink cannot redirect it) and removed on any
    failure (`dfdoctor.agent.atomic`, the one atomic write). A device, FIFO or /dev/stdout is written through,
    never replaced; a symlink's target is written, and the link kept. The new file gets 0600 when `private`, else the mode of the file it replaces (or what
    the umask allows a new file).
    """
    path = Path(path)
    if path.exists() and not path.is_file():  # followed through links: /dev/stdout on a pipe has no real name
        write_through(path, text)
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        mode = 0o600 if private else path.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    replace_atomically(path, lambda f: f.write(text), mode=mode, suffix=".dfdoctor-tmp")


# A path or argument may hold bytes that are not UTF-8 (Python keeps them as lone surrogates): they are written back
# as the same bytes, never a crash.
ENCODING_ERRORS = "surrogateescape"
# How long a FIFO or device may take no data before the write gives up (a reader that stopped reading).
STALL_S = 10.0


def write_through(path: Path, text: str, *, stall_s: float = STALL_S) -> None:
    """Write `text` into a FIFO or device without replacing it, never blocking for ever: a FIFO no one reads
    fails at once (ENXIO, as `--log` does), and a reader that stops reading fails after `stall_s` (ETIMEDOUT)."""
    data = text.encode("utf-8", ENCODING_ERRORS)
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        done = 0
        while done < len(data):
            try:
                done += os.write(fd, data[done:done + 65536])
                continue
            except BlockingIOError:
                pass
            _, ready, _ = select.select([], [fd], [], stall_s)
            if not ready:
                raise OSError(errno.ETIMEDOUT, f"nothing read from it for {stall_s:.0f} s")
    finally:
        os.close(fd)


def open_summary(path: str) -> int:
    """A file descriptor to append to $GITHUB_STEP_SUMMARY: only a plain file GitHub made for the step, never
    through a symlink (it could lead to the --log or any other file) nor into a hard-linked one, never blocking
    on a FIFO. OSError otherwise."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | os.O_NOCTTY, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symlink: not followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a plain file")
        if st.st_nlink > 1:
            raise OSError(errno.EMLINK, "it has other names (a hard link): it may be another file")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
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
