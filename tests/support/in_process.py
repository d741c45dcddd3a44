"""dfdoctor's command run in the test's own process, through the entry the console script calls (`run`, click in
the standalone mode the script uses), for the runs of a test whose point is what dfdoctor prints or writes, not
the process boundary: each console-script start is ~80 ms of CPU of imports the worker has already done.

Like a subprocess it is given its own working folder and environment (put back after), and its stdout and stderr
are read at the file-descriptor level (a pipe's place: not a terminal, with a fileno), returned as a
CompletedProcess. Keep at least one console-script run (conftest.run_dfdoctor) per thing the process itself
proves: the exit status, the split of stdout and stderr, the environment a shell gives it, signals.
"""

from __future__ import annotations

import io
import locale
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from typing import Iterator, Optional


@contextmanager
def _environment(env: dict) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _folder(cwd: Optional[os.PathLike | str]) -> Iterator[None]:
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _captured(out, err) -> Iterator[None]:
    """fds 1 and 2 onto the two files, and sys.stdout/stderr text streams over them, as a child's would be (the
    encoding and error handlers this interpreter chose for its own at start-up: the child's environment is ours)."""
    streams = (sys.stdout, sys.stderr)
    enc = getattr(sys.__stdout__, "encoding", None) or locale.getpreferredencoding(False)
    out_errors = getattr(sys.__stdout__, "errors", None) or "strict"
    for s in streams:
        s.flush()
    kept = (os.dup(1), os.dup(2))
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding=enc, errors=out_errors)
    sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), encoding=enc, errors="backslashreplace",
                                  line_buffering=True)
    try:
        yield
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = streams
        os.dup2(kept[0], 1)
        os.dup2(kept[1], 2)
        os.close(kept[0])
        os.close(kept[1])


def run_here(*args: str | bytes, cwd: Optional[os.PathLike | str] = None, env: Optional[dict] = None,
             full_env: Optional[dict] = None, binary: bool = False) -> subprocess.CompletedProcess:
    """`dfdoctor ARGS` in this process. `env` is added to this process's environment (NO_COLOR=1 unless given),
    as conftest.run_dfdoctor does; `full_env` is the whole environment instead, as subprocess's env= is. An argv
    word given as bytes is decoded as Python decodes its own argv (os.fsdecode). Output as text (decoded as
    subprocess's text=True does), or as bytes with `binary`."""
    from dfdoctor.cli.main import run
    if full_env is None:
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.setdefault("NO_COLOR", "1")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with _environment(full_env), _folder(cwd), _captured(out, err):
            code = run([os.fsdecode(a) if isinstance(a, bytes) else a for a in args])
        got = []
        for f in (out, err):
            f.seek(0)
            data = f.read()
            got.append(data if binary else data.decode(locale.getpreferredencoding(False)))
    return subprocess.CompletedProcess(["dfdoctor", *args], code, got[0], got[1])
