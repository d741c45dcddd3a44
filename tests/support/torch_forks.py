"""Scripts that race torch.compile run as forks of one interpreter that imported torch and torch._dynamo once, as
`dfdoctor check` runs compile.race's runs (doctor/probe_server.py: the product's own probe server).

A test that runs such a script two or three times (without the guard, then with it) started a fresh interpreter
for each: `import torch, torch._dynamo` is ~2.9 CPU-s of each ~4 CPU-s run here and the teardown of torch ~0.5
more, the same for every run. tests/conftest.py's `torch_forks_server` keeps one server per worker for the
tests that use it, which share a worker (its unit `TORCH_FORKS`). Each fork still compiles afresh (nothing is
compiled in the server, which stays single-threaded), gets its own stdout, stderr, exit status and session, and
leaves with the script's own atexit handlers run; its argv, cwd and environment are the script's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

from dfdoctor import probe_server
from dfdoctor.context import Context

# What every compile of these scripts imports; the server imports it before its first fork.
COMPILE_MODULES = ("torch._dynamo", "torch._functorch.aot_autograd")
# `python -m MODULE` as a script the server can run (it runs files): runpy, as the interpreter does for -m.
AS_MODULE = str(Path(__file__).resolve().parent / "as_module.py")

Run = Callable[..., subprocess.CompletedProcess]


@contextlib.contextmanager
def torch_forks(cwd: os.PathLike | str, preload: Sequence[str] = COMPILE_MODULES) -> Iterator[Run]:
    """`run(argv, timeout, cwd=None)`: the Python script `argv[0]` with its arguments (in `cwd`, else the block's)
    and this process's environment at the call, in a fork of the block's server; a subprocess.CompletedProcess as
    subprocess.run gives it. Where the server does not take it (it could not start), the script runs in a fresh
    interpreter: the same answer, at the old cost.

    The server is the product's own (`probe_server`), but not its active one: that is set only while a run is
    handed over, so the block may outlive a test without any later test's `dfdoctor check` in this process
    finding it (a test that serves its own probes gets its own server, as it would without this one)."""
    ctx = Context(command=[sys.executable, "-c", "import torch"], cwd=Path(cwd), python=sys.executable,
                  env=dict(os.environ))
    proc, folder, path, env = probe_server._spawn(ctx, job_imports=False)
    server = probe_server.Server(proc.pid, path, env, sys.executable) if proc is not None else None

    def run(argv: Sequence[str], timeout: float, cwd: os.PathLike | str | None = None) -> \
            subprocess.CompletedProcess:
        argv, cwd = [str(a) for a in argv], str(cwd or ctx.cwd)
        out = None
        if server is not None and probe_server._active is None:
            probe_server._active = server
            try:
                out = probe_server.run(argv, timeout=timeout, cwd=cwd, env={**os.environ, **_SERVER_SAYS},
                                       stack_signal=None, preload=preload)
            finally:
                probe_server._active = None
        if out is None:
            return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True,
                                  timeout=timeout)
        if out.timed_out:
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout, out.stdout, out.stderr)
        return subprocess.CompletedProcess([sys.executable, *argv], out.returncode, out.stdout, out.stderr)

    try:
        yield run
    finally:
        probe_server._stop(proc, folder, path)


# What the server's own environment adds to the caller's (probe_server._spawn): its forks keep it.
_SERVER_SAYS = {"PYTHONDONTWRITEBYTECODE": "1"}
