"""dfdoctor.guard: let several threads torch.compile at once without racing or deadlocking.

    from dfdoctor.guard import compile_guard

    def worker(i):                                   # each thread compiles its own model
        model = torch.compile(make_model(i))
        for x, y in batches(i):
            with compile_guard(x.shape):             # forward, backward and optimizer step
                loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()

Why. AOTAutograd compiles a backward lazily, at the first `.backward()`, outside dynamo's compile. Its FX
tracer sets the process-global `torch.fx._symbolic_trace._is_fx_tracing_flag`; another thread entering its
compiled function meanwhile raises "Detected that you are using FX to symbolically trace a dynamo-optimized
function". On a GPU with flex_attention it deadlocks: a thread holds dynamo's `compile_lock` while tracing
flex_attention (which waits on the autograd engine's device thread), and that device thread compiles another
thread's lazy backward and waits for `compile_lock`.

What the guard does. A thread's first step on a key (an input shape: whatever decides a recompile) may compile,
so it runs alone: it takes a shared/exclusive gate exclusively. Warm steps take it shared and run in parallel.
No thread is inside a compiled function while another compiles, so neither the flag race nor the lock cycle
can form. On entering its first guarded step a thread also gets the per-thread torch settings (`setup_thread`):
`force_non_lazy_backward_lowering` (backwards compiled with their forward, never on the engine's thread), and
the compile config the main thread set, which torch >= 2.12 keeps per thread (a ContextVar) so a new thread
would not see it.

Proven (reproduced without the guard, held with it): torch 2.13 on CPU, torch 2.11 on an H200 with
flex_attention (docs/guard.md gives the runs). On another torch the guard refuses to run
(`UnprovenTorch`) until `dfdoctor check --only compile.race` proved it in that interpreter and you set
DFDOCTOR_GUARD_UNPROVEN=1 (or pass `allow_unproven=True` to `setup_thread`).

This file imports only the standard library, and torch lazily, so `dfdoctor check` can ship it alone to an
interpreter that does not have dfdoctor installed and prove this very code there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Any, Callable, Hashable, Iterator, Optional

# torch (major, minor) where the reproduction raced or deadlocked without the guard and never with it.
PROVEN_TORCH = ((2, 11), (2, 13))
UNPROVEN_ENV = "DFDOCTOR_GUARD_UNPROVEN"
# Config modules whose values torch keeps per thread; the main thread's values are copied into each worker.
_CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")


class UnprovenTorch(RuntimeError):
    """The running torch is not one the guard was proven on."""


class SharedExclusiveGate:
    """A readers-writer gate with writer preference: compiling steps exclusive, warm steps shared."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the gate alongside other shared holders, never alongside an exclusive one."""
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the gate alone."""
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


_GATE = SharedExclusiveGate()
_local = threading.local()
_shared_config: dict[str, dict[str, Any]] = {}


def torch_version() -> tuple[int, int]:
    """(major, minor) of the torch this process imports."""
    import torch

    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def check_torch(allow_unproven: bool = False) -> tuple[int, int]:
    """The torch version, or UnprovenTorch when the guard was never proven on it (and nobody allowed it)."""
    version = torch_version()
    if version in PROVEN_TORCH or allow_unproven or os.environ.get(UNPROVEN_ENV) == "1":
        return version
    import torch

    proven = ", ".join(f"{a}.{b}" for a, b in PROVEN_TORCH)
    raise UnprovenTorch(
        f"dfdoctor.guard is proven on torch {proven}, not on torch {torch.__version__}. Run `dfdoctor check "
        f"--only compile.race -- <your launch command>` with this interpreter: it reproduces the race and tries "
        f"this guard here. If the guard held, set {UNPROVEN_ENV}=1 to use it.")


def share_config() -> None:
    """Remember the calling thread's compile config (dynamo, inductor, functorch) for `setup_thread` to copy
    into each worker: torch >= 2.12 keeps these values per thread. Call it where you set them, before the
    workers start; `compile_guard` copies nothing unless this was called."""
    import importlib

    import torch  # noqa: F401 (the config modules need torch imported)

    import warnings

    _shared_config.clear()
    for name in _CONFIG_MODULES:
        mod = importlib.import_module(name)
        if hasattr(mod, "get_config_copy"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _shared_config[name] = dict(mod.get_config_copy())


def setup_thread(allow_unproven: bool = False) -> None:
    """The per-thread torch settings the guard needs; `compile_guard` calls it on a thread's first step.

    Checks the torch version, copies the config `share_config` remembered, and sets
    `force_non_lazy_backward_lowering` where this torch has it. Calling it again in a thread does nothing.
    """
    if getattr(_local, "ready", False):
        return
    check_torch(allow_unproven)
    import importlib
    import warnings

    for name, values in _shared_config.items():
        mod = importlib.import_module(name)
        with warnings.catch_warnings():  # deprecated entries warn when read; they are copied all the same
            warnings.simplefilter("ignore")
            for key, value in values.items():
                try:
                    if getattr(mod, key) != value:
                        setattr(mod, key, value)
                except Exception:  # a renamed or read-only entry: the rest still applies
                    continue
    import torch._functorch.config as fconfig

    if hasattr(fconfig, "force_non_lazy_backward_lowering"):
        fconfig.force_non_lazy_backward_lowering = True
    _local.ready = True


def compile_guard(key: Hashable = None, *, allow_unproven: bool = False) -> contextlib.AbstractContextManager:
    """What wraps one whole training step (forward, backward, optimizer) of the calling thread.

    `key` names what the step compiles, usually the input shape: the thread's first step on each key runs
    alone, later ones share the gate. Used bare as a decorator (`@compile_guard`), the key is the shapes and
    dtypes of the call's arguments.
    """
    if callable(key) and not isinstance(key, tuple):
        return _decorate(key, allow_unproven)  # type: ignore[return-value]
    setup_thread(allow_unproven)
    seen = _local.__dict__.setdefault("seen", set())
    if key in seen:
        return _GATE.shared()
    seen.add(key)  # the first step on this key compiles: forward now, backward at .backward()
    return _GATE.exclusive()


def _decorate(fn: Callable, allow_unproven: bool) -> Callable:
    """`fn` with each call run under `compile_guard`, keyed on its arguments' shapes and dtypes."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with compile_guard((id(fn), _shapes(args), _shapes(tuple(kwargs.items()))), allow_unproven=allow_unproven):
            return fn(*args, **kwargs)

    return guarded


def _shapes(values: tuple) -> tuple:
    """What of the arguments decides a recompile, as far as it can be read without torch: shape and dtype."""
    out = []
    for v in values:
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
            out.append((v[0], _shapes((v[1],))))
        elif hasattr(v, "shape") and hasattr(v, "dtype"):
            out.append((tuple(v.shape), str(v.dtype)))
        elif isinstance(v, (str, bool, type(None))):
            out.append(v)  # ints and floats are keyed by type: a step counter must not make every step new
        else:
            out.append(type(v).__name__)
    return tuple(out)


def proven_here() -> Optional[str]:
    """None when this torch is proven, else why not (for callers that want to warn instead of raise)."""
    try:
        check_torch()
    except UnprovenTorch as exc:
        return str(exc)
    return None
