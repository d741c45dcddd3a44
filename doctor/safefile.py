"""Reading and writing files without harming the user's: atomic replacement through a temp file no one can
predict, the test that an output would not land on a file the user named for something else, and the one bounded
read of a file the user named (never a device, never more than a few MiB, never waiting for ever on a FIFO)."""

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
    on a FIFO. OSError otherwise. No folder on its way may be a symlink either (a link to the folder of the
    --log would lead the summary into a file of the same name there)."""
    fd = open_without_symlinks(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
                               | os.O_NOCTTY, 0o666)
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


def open_without_symlinks(path: str, flags: int, mode: int = 0o666) -> int:
    """os.open that follows no symlink anywhere on the path, component by component from the root through
    O_PATH descriptors (what openat2's RESOLVE_NO_SYMLINKS does, which Python does not offer): a link swapped in
    between two steps cannot redirect it. OSError(ELOOP) names the link."""
    parts = Path(os.path.abspath(path)).parts
    fd = os.open(parts[0], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts[1:], 1):
            last = i == len(parts) - 1
            try:
                nfd = os.open(name, (flags if last else os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) | os.O_NOFOLLOW,
                              mode, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(os.path.join(*parts[:i + 1])):
                    where = "it is a symlink" if last else f"{os.path.join(*parts[:i + 1])} is a symlink"
                    raise OSError(errno.ELOOP, f"{where}: not followed") from None
                raise
            os.close(fd)
            fd = nfd
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


def one_of(path: str, files: Iterable[tuple[str, Path]]) -> Optional[str]:
    """What names `path` among `files` ((what, path) pairs), whatever symlinks, `..` or hard links lead there:
    the `what` of the first that is the same file; None when none is."""
    real, ident = _identity(Path(path))
    for what, p in files:
        g_real, g_ident = _identity(Path(p))
        if real == g_real or (ident is not None and ident == g_ident):
            return what
    return None


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


def read_head(path: os.PathLike[str] | str, limit: int) -> Optional[bytes]:
    """At most `limit` + 1 bytes from the start of a file dfdoctor found itself (a README, a source file, an
    `-r` include): one more than `limit` says it is larger, never a whole file of unknown size (`-r
    data/corpus.txt` of 512 MiB). None when it is no regular file (a FIFO is never waited on) or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return _read_at_most(fd, limit, None)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_head_text(path: os.PathLike[str] | str, limit: int) -> Optional[str]:
    """`read_head`'s first `limit` bytes as text (undecodable bytes replaced); None as read_head."""
    data = read_head(path, limit)
    return None if data is None else data[:limit].decode("utf-8", "replace")


# The most a file the user names as input (--targets-file, a config, a saved report) may hold: any of them is a few
# KiB; /dev/zero or a 3 GB file must not grow dfdoctor until the OOM killer fires on a shared machine.
READ_LIMIT = 8 << 20
# How long a FIFO or pipe may give nothing before the read gives up: `--targets-file <(cmd)` waits for its writer
# while that writes, a FIFO nothing writes to does not hang.
READ_STALL_S = 10.0


def kind_of(mode: int) -> str:
    """What a non-regular file is, in the user's words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISFIFO, "a FIFO")):
        if test(mode):
            return name
    return "not a plain file"


def regular_file_problem(path: Path) -> Optional[str]:
    """Why `path` (followed through links) is not a regular file to read, or None when it is one."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if stat.S_ISREG(st.st_mode):
        return None
    return f"not a regular file ({kind_of(st.st_mode)})"


def read_user_file(path: Path, what: str, *, limit: int = READ_LIMIT, stall_s: float = READ_STALL_S,
                   pipes: bool = True) -> bytes:
    """The bytes of a file the user named as input, `what` naming it in the error ("--targets-file x").

    A regular file, or (with `pipes`) a FIFO or pipe such as bash's `<(cmd)`, read until its writer closes it;
    anything else (/dev/zero, a directory, a socket) is refused. More than `limit` bytes, or a FIFO that gives
    nothing for `stall_s`, is refused too: UsageError (exit 2) with the reason, never a hang nor a huge read.
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading does not wait for a writer (the poll below waits, with a deadline).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            data = _read_at_most(fd, limit, None)
        elif stat.S_ISFIFO(mode) and pipes:
            data = _read_at_most(fd, limit, stall_s)
        else:
            raise UsageError(f"{what}: not a regular file ({kind_of(mode)}); name a file")
    except OSError as exc:
        raise UsageError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if data is None:
        raise UsageError(f"{what}: nothing was written to it for {stall_s:.0f} s (a FIFO no one writes to?)")
    if len(data) > limit:
        raise UsageError(f"{what}: larger than {limit >> 20} MiB, more than such a file holds; name the right file")
    return data


def _read_at_most(fd: int, limit: int, stall_s: Optional[float]) -> Optional[bytes]:
    """Up to `limit` + 1 bytes (one more says "too large"); from a FIFO (`stall_s` given), None when no byte came for
    `stall_s`. Linux reports a FIFO's end only once a writer has come and gone, so the poll waits for the writer."""
    chunks: list[bytes] = []
    size = 0
    poller = select.poll() if stall_s is not None else None
    if poller is not None:
        poller.register(fd, select.POLLIN)
    while size <= limit:
        if poller is not None:
            if not poller.poll(stall_s * 1000):
                return None
            try:
                chunk = os.read(fd, min(65536, limit + 1 - size))
            except BlockingIOError:
                continue
        else:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
