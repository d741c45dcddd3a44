"""The fix line of an exception no known cause explains: it points at the job's own line, never asks the user
to edit the standard library or an installed package, and keeps the library's frame as what it was: where the
error surfaced."""

from __future__ import annotations

from dfdoctor.diagnose.traceback import PyError


def blame_fix(err: PyError) -> str:
    """What to look at first, in the user's code."""
    if err.in_library:
        return (f"Look at {err.blame}: the call there gave {_package(err.file)} something it could not handle "
                f"({err.headline[:200]}); the library frame that raised it is in the evidence.")
    if err.user_frame is None and err.file:  # every frame is in a library: the job's entry point is a package
        return (f"The error was raised inside {_package(err.file)} ({err.where}), with no frame of your own code "
                "in the traceback: check the arguments and configuration the job passed to it.")
    return f"Fix the error raised at {err.where}."


def _package(path: str) -> str:
    """The installed package (or 'the standard library') a library frame belongs to."""
    p = path.replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in p:
            return p.split(marker, 1)[1].split("/", 1)[0]
    return "the standard library" if "/lib/python" in p else path
