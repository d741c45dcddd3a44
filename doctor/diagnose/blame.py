"""The fix line of an exception no known cause explains: it points at the job's own line, never asks the user
to edit the standard library or an installed package, and keeps the library's frame as what it was: where the
error surfaced."""

from __future__ import annotations

import os

from dfdoctor.diagnose.traceback import PyError


def blame_fix(err: PyError) -> str:
    """What to look at first, in the user's code."""
    outer = err.user_frame[0] if err.user_frame else err.file
    if outer and _launcher(outer):  # torchrun's own script in the venv's bin/: no line of the user's ran
        return (f"The error was raised by the launcher {os.path.basename(outer)} itself, before any code of "
                f"yours ran ({err.headline[:200]}): check the launcher options of your command line.")
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


def _launcher(path: str) -> bool:
    """A console script of an environment's bin/ (torchrun, accelerate, deepspeed): not the user's file."""
    p = path.replace("\\", "/")
    return "/bin/" in p and not p.endswith(".py")
