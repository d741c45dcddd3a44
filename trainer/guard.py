"""The compile guard: lets several threads torch.compile at once without racing or deadlocking.

Why it is needed. AOTAutograd compiles a backward lazily, at the first `.backward()`, outside dynamo's
compile. Inductor's backward compile runs `make_fx`, whose `Tracer.trace` sets the process-global
`torch.fx._symbolic_trace._is_fx_tracing_flag`; another thread entering its compiled function meanwhile sees
the flag and raises "Detected that you are using FX to symbolically trace a dynamo-optimized function" (CPU).
On a GPU the lazy backward compile runs on the autograd engine's device thread and waits for dynamo's
`compile_lock`, while the lock's holder (a thread compiling flex_attention, which calls `torch.autograd.grad`)
waits for that same device thread: a silent deadlock.

The fix. `torch._functorch.config.force_non_lazy_backward_lowering = True` compiles each backward inside its
forward's compile: under the compile lock and while dynamo is compiling, so the global flag is masked by
`torch.compiler.is_compiling()` and the device thread never compiles. Measured 0 failures in the reproduction
on torch 2.13.0 CPU (bench/results/race_*) and no deadlock on an H200 with torch 2.11 (bench/results/
trainer_gpu_*). From torch 2.13 config values are per thread (ContextVar), so every thread that compiles must
call `apply_compile_guard()` itself; calling it in the main thread alone silently does nothing in workers.

On a torch without that option the guard falls back to one process-wide lock around each whole training step
(also 0 failures in the reproduction, but it serialises the drafters' steps).
"""

from __future__ import annotations

import contextlib
import threading
from typing import ContextManager

GUARDS = ("eager-backward", "step-lock", "off")
_STEP_LOCK = threading.RLock()


def eager_backward_available() -> bool:
    """Whether this torch has `force_non_lazy_backward_lowering`."""
    import torch._functorch.config as fconfig

    return hasattr(fconfig, "force_non_lazy_backward_lowering")


def resolve(guard: str) -> str:
    """The guard that will actually run here: eager-backward falls back to step-lock on an old torch."""
    if guard == "eager-backward" and not eager_backward_available():
        return "step-lock"
    return guard


def apply_compile_guard(guard: str = "eager-backward") -> None:
    """Set the guard's per-thread torch config; call it at the start of every thread that compiles."""
    if resolve(guard) == "eager-backward":
        import torch._functorch.config as fconfig

        fconfig.force_non_lazy_backward_lowering = True


def step_context(guard: str) -> ContextManager:
    """What wraps one whole training step: the process-wide lock for `step-lock`, nothing otherwise."""
    return _STEP_LOCK if resolve(guard) == "step-lock" else contextlib.nullcontext()
