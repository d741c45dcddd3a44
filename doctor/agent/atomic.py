"""The one atomic write: a file is replaced only once its new content is complete, so a crash never leaves half a
file. Standard library only: the recorder uses it on targets, dfdoctor's own files (`dfdoctor.safefile`) here."""

import errno
import os

# the letters of tempfile.mkstemp's names; the module itself (with shutil, random, bz2, lzma behind it) was a
# seventh of the recorder's imports, for one call per heartbeat
_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_TRIES = 10000  # tempfile.TMP_MAX


def _make_temp(folder, prefix, suffix):
    """mkstemp's file: 0600, created with O_EXCL under a name of 8 random letters (never an existing file, nor a
    symlink planted at the name); (fd, path)."""
    for _ in range(_TRIES):
        name = "".join(_LETTERS[b % len(_LETTERS)] for b in os.urandom(8))
        path = os.path.join(folder, prefix + name + suffix)
        try:
            return os.open(path, _FLAGS, 0o600), os.path.abspath(path)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "No usable temporary file name found")


def replace_atomically(path, write, mode=None, binary=False, suffix=""):
    """Replace `path` with what `write(f)` writes into an open temp file beside it.

    The temp file is made as mkstemp makes it (`_make_temp`) in `path`'s folder (0600, a name nobody could
    predict or plant a symlink at), named `.NAME.XXXX` + `suffix`; it gets `mode` when given, and is removed on
    any failure. Text is UTF-8, with bytes that are not (lone surrogates) written back as the same bytes.
    """
    folder, name = os.path.split(os.fspath(path))
    fd, tmp = _make_temp(folder or ".", "." + name[:100] + ".", suffix)
    try:
        with (os.fdopen(fd, "wb") if binary else
              os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape")) as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
