"""Scripts that race torch.compile run as forks of one interpreter that imported torch and torch._dynamo once, as
`dfdoctor check` runs compile.race's runs (doctor/probe_server.py: the product's own probe server).

A test that runs such a script two or three times (without the guard, then with it) started a fresh interpreter
for each: `import torch, torch._dynamo` is ~2.9 CPU-s of each ~4 CPU-s run here and the teardown of torch ~0.5
more, the same for every run. Each fork still compiles afresh (nothing is compiled in the server, which stays
single-threaded), gets its own stdout, stderr, exit status and session, and leaves with the script's own atexit
handlers run; its argv, cwd and environment are the script's."""

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
    """`run(argv, timeout)`: the Python script `argv[0]` with its arguments, in a fork of the block's server; a
    subprocess.CompletedProcess as subprocess.run gives it. Where the server does not take it (it could not
    start), the script runs in a fresh interpreter: the same answer, at the old cost."""
    env = dict(os.environ)
    ctx = Context(command=[sys.executable, "-c", "import torch"], cwd=Path(cwd), python=sys.executable, env=env)
    with probe_server.serving(ctx, wanted=True, job_imports=False) as server:

        def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
            argv = [str(a) for a in argv]
            out = probe_server.run(argv, timeout=timeout, cwd=cwd, env=server.env, stack_signal=None,
                                   preload=preload) if server is not None else None
            if out is None:
                return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True,
                                      timeout=timeout)
            if out.timed_out:
                raise subprocess.TimeoutExpired([sys.executable, *argv], timeout, out.stdout, out.stderr)
            return subprocess.CompletedProcess([sys.executable, *argv], out.returncode, out.stdout, out.stderr)

        yield run
