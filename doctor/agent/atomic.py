"""The one atomic write: a file is replaced only once its new content is complete, so a crash never leaves half a
file. Standard library only: the recorder uses it on targets, dfdoctor's own files (`dfdoctor.safefile`) here."""

import os
import tempfile


def replace_atomically(path, write, mode=None, binary=False, suffix=""):
    """Replace `path` with what `write(f)` writes into an open temp file beside it.

    The temp file is made by mkstemp in `path`'s folder (0600, a name nobody could predict or plant a symlink
    at), named `.NAME.XXXX` + `suffix`; it gets `mode` when given, and is removed on any failure. Text is UTF-8,
    with bytes that are not (lone surrogates) written back as the same bytes.
    """
    folder, name = os.path.split(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + name[:100] + ".", suffix=suffix, dir=folder or ".")
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
