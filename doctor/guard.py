"""dfdoctor.guard: let several threads torch.compile at once without racing, deadlocking or hanging.

    from dfdoctor.guard import compile_guard

    def worker(i):                                   # each thread compiles its own model
        model = torch.compile(make_model(i))
        for x, y in batches(i):
            with compile_guard(x.shape):             # before the thread's first compiled call
                loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()

Why. AOTAutograd compiles a backward lazily, at the first `.backward()`, outside dynamo's compile (and, for
CUDA tensors, on the autograd engine's device thread). Its FX tracer sets the process-global
`torch.fx._symbolic_trace._is_fx_tracing_flag`; another thread entering its compiled function meanwhile raises
"Detected that you are using FX to symbolically trace a dynamo-optimized function". On a GPU with
flex_attention it deadlocks: a thread holds dynamo's `compile_lock` while tracing flex_attention (which waits
on the autograd engine's device thread), and that device thread compiles another thread's lazy backward and
waits for `compile_lock`.

What the guard does: it gates only torch's own compiling, never the user's step, so it holds nothing while a
thread waits on a queue, a lock or another thread, and a thread already inside is never gated again.
- Per thread (`setup_thread`, on its first guarded step): `force_non_lazy_backward_lowering`, so a backward
  compiles with its forward, in that thread, under `compile_lock`, never later on the engine's device thread
  (that removes the lock cycle); and the compile config the main thread shared (`share_config`), which torch
  >= 2.12 keeps per thread.
- Once per process (`install`): every compile runs under dynamo's `compile_lock`, the lazy backward's too
  (torch's `LAZY_BACKWARD` compile hook, `torch._dynamo.callback.callback_handler.install_callbacks`); and
  the check a compiled function makes on entry (`is_fx_symbolic_tracing`) waits, when another thread's
  compile holds the FX flag, for that compile to end instead of raising. A thread torch created itself (the
  autograd device thread) is never made to wait: there it keeps torch's own answer.

Proven (reproduced without the guard, held with it): torch 2.13 on CPU (docs/guard.md gives the runs). On
another torch the guard refuses to run (`UnprovenTorch`) until `dfdoctor check --only compile.race` proved
it in that interpreter and you set DFDOCTOR_GUARD_UNPROVEN=1 (or pass `allow_unproven=True`).

This file imports only the standard library, and torch lazily, so `dfdoctor check` can ship it alone to an
interpreter that does not have dfdoctor installed and prove this very code there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from typing import Any, Callable, Hashable, Iterator, Optional

# torch (major, minor) where the reproduction raced or deadlocked without this guard and never with it.
# 2.11: an H200 with flex_attention, bench/gpu_guard_round5.sh -> bench/results/h200_round5_guard/ (no guard 3/3
# deadlocked, the guard 5/5 and its pipeline 3/3 completed). 2.13: CPU, this repository's CI.
PROVEN_TORCH = ((2, 11), (2, 13))
UNPROVEN_ENV = "DFDOCTOR_GUARD_UNPROVEN"
# Config modules whose values torch keeps per thread; the main thread's values are copied into each worker.
_CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")
# The name under which torch's FX module finds the guard's entry check (see _install_entry_check).
_ENTRY_CHECK = "_dfdoctor_guard_traced_here"
# Seconds between the lines a thread writes while it waits for another thread's compile.
WAIT_REPORT_S = 60.0


class UnprovenTorch(RuntimeError):
    """The running torch is not one the guard was proven on."""


_local = threading.local()
_install_lock = threading.Lock()
_installed: dict[str, bool] = {}
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

    Checks the torch version, installs the process-wide compile gate (`install`), copies the config
    `share_config` remembered, and sets `force_non_lazy_backward_lowering` where this torch has it. Calling it
    again in a thread does nothing.
    """
    if getattr(_local, "ready", False):
        return
    check_torch(allow_unproven)
    install()
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


def install() -> dict[str, bool]:
    """Gate torch's compiling for the whole process, once; what was installed (both True where torch has
    the hooks). `setup_thread` calls it; call it yourself where threads you do not write compile.

    - `lazy_backward`: the backward compiled at the first `.backward()` runs under dynamo's `compile_lock`,
      as every forward compile does, so no two FX traces ever overlap.
    - `entry_check`: a compiled function entered while another thread's compile traces waits for that
      compile to end, instead of reading the FX flag that compile raised and failing.
    """
    with _install_lock:
        if not _installed:
            _installed["lazy_backward"] = _install_lazy_backward_lock()
            _installed["entry_check"] = _install_entry_check()
        return dict(_installed)


def _install_lazy_backward_lock() -> bool:
    """Wrap torch's compile hook so the LAZY_BACKWARD compile takes `compile_lock` first (inductor's backward
    compiler takes it inside anyway; taking it first keeps one lock order, and covers every backend)."""
    try:
        from torch._dynamo import callback as dcallback
        from torch._dynamo import convert_frame
    except ImportError:
        return False
    handler = getattr(dcallback, "callback_handler", None)
    lazy = getattr(getattr(dcallback, "CallbackTrigger", None), "LAZY_BACKWARD", None)
    original = getattr(handler, "install_callbacks", None)
    if lazy is None or original is None:
        return False
    if getattr(original, "_dfdoctor_guard", False):
        return True

    @contextlib.contextmanager
    def locked(hooks: contextlib.AbstractContextManager) -> Iterator[None]:
        with convert_frame.compile_lock, hooks:
            yield

    def install_callbacks(trigger: Any, *args: Any, **kwargs: Any) -> contextlib.AbstractContextManager:
        hooks = original(trigger, *args, **kwargs)
        return locked(hooks) if trigger is lazy else hooks

    install_callbacks._dfdoctor_guard = True  # type: ignore[attr-defined]
    handler.install_callbacks = install_callbacks
    return True


def _install_entry_check() -> bool:
    """Make the FX check every compiled function runs on entry wait out another thread's compile.

    `compile_wrapper` (torch._dynamo.eval_frame) captured `is_fx_symbolic_tracing` when the user called
    torch.compile, so the function object cannot be swapped; its code is, with the same globals, and it
    calls back here only while the flag is up outside a compile session (the rare, racing case)."""
    try:
        import torch.fx._symbolic_trace as st
    except ImportError:
        return False
    fn = getattr(st, "is_fx_symbolic_tracing", None)
    if fn is not None and _ENTRY_CHECK in fn.__code__.co_names:
        return True  # installed already (by this module, or by another copy of this file)
    if fn is None or set(fn.__code__.co_names) - {"_is_fx_tracing_flag", "torch", "compiler", "is_compiling"}:
        return False  # not the check this was written against: leave it alone
    scope: dict[str, Any] = {}
    exec(f"def is_fx_symbolic_tracing():\n"
         f"    return _is_fx_tracing_flag and not torch.compiler.is_compiling() and {_ENTRY_CHECK}()\n", scope)
    setattr(st, _ENTRY_CHECK, _traced_here)
    fn.__code__ = scope["is_fx_symbolic_tracing"].__code__
    return True


def _traced_here() -> bool:
    """Whether the FX trace now running is one a compiled function entered here must refuse (torch's answer),
    once no other thread's compile is tracing: those hold `compile_lock`, so wait for it."""
    import torch
    import torch.fx._symbolic_trace as st
    from torch._dynamo import convert_frame

    lock = convert_frame.compile_lock
    if lock._is_owned() or isinstance(threading.current_thread(), threading._DummyThread):
        # this thread's own compile; or a thread torch started (the autograd device thread), which a compile
        # may be waiting on: waiting there could close a cycle, so it keeps torch's answer
        return True
    waited = 0.0
    while not lock.acquire(timeout=WAIT_REPORT_S):  # a compile may take minutes: never silent, never an error
        waited += WAIT_REPORT_S
        sys.stderr.write(f"dfdoctor.guard: thread {threading.current_thread().name!r} has waited {waited:.0f} s to "
                         f"enter a compiled function while thread {_lock_owner(lock)!r} compiles (it holds torch's "
                         f"compile_lock); if that compile is stuck, its stack says why (py-spy dump --pid "
                         f"{os.getpid()})\n")
    try:
        return st._is_fx_tracing_flag and not torch.compiler.is_compiling()
    finally:
        lock.release()


def _lock_owner(lock: Any) -> str:
    """The name of the thread holding an RLock (its repr carries the owner's ident)."""
    match = re.search(r"owner=(\d+)", repr(lock))
    thread = threading._active.get(int(match.group(1))) if match else None  # type: ignore[attr-defined]
    return thread.name if thread else (f"ident {match.group(1)}" if match else "?")


def compile_guard(key: Hashable = None, *, allow_unproven: bool = False) -> contextlib.AbstractContextManager:
    """What goes around a thread's training steps (or at least its first): `with compile_guard(x.shape):`,
    or `@compile_guard` on the step function.

    It gives the calling thread the guard's settings (`setup_thread`) on its first use and holds nothing
    while the step runs: the gate is on torch's compiling itself (`install`), so nested guards and steps
    that hand data to other threads cannot deadlock. `key` is accepted for compatibility and not needed:
    every compile and recompile is gated, whatever its cause.
    """
    if callable(key) and not isinstance(key, tuple):
        return _decorate(key, allow_unproven)  # type: ignore[return-value]
    setup_thread(allow_unproven)
    return contextlib.nullcontext()


def _decorate(fn: Callable, allow_unproven: bool) -> Callable:
    """`fn` with the guard's per-thread settings applied before each call."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        setup_thread(allow_unproven)
        return fn(*args, **kwargs)

    return guarded


def proven_here() -> Optional[str]:
    """None when this torch is proven, else why not (for callers that want to warn instead of raise)."""
    try:
        check_torch()
    except UnprovenTorch as exc:
        return str(exc)
    return None
