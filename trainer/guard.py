"""The compile guard: lets several threads torch.compile at once without racing or deadlocking.

Why it is needed. AOTAutograd compiles a backward lazily, at the first `.backward()`, outside dynamo's
compile. Inductor's backward compile can run `make_fx`, whose `Tracer.trace` sets the process-global
`torch.fx._symbolic_trace._is_fx_tracing_flag`; another thread entering its compiled function meanwhile sees
the flag and raises "Detected that you are using FX to symbolically trace a dynamo-optimized function". On a
GPU, flex_attention makes it worse: the lazy backward compile runs on the autograd engine's device thread and
waits for dynamo's `compile_lock`, while the lock's holder (a thread tracing flex_attention, which calls
`torch.autograd.grad`) waits for that same device thread: a silent deadlock.

The guard (`exclusive-compile`, the default) does two things:
1. a step that may compile (this thread's first step on a shape bucket: forward, lazy backward and all) runs
   alone: it takes a gate exclusively, while warm steps share it. No thread is inside a compiled function,
   or keeping the device thread busy, while another compiles, so neither the global-flag race nor the lock
   cycle can form. After warm-up only shared entries remain: the steady state runs in parallel as before.
2. `torch._functorch.config.force_non_lazy_backward_lowering = True`, so each backward is compiled inside its
   forward's compile and never later on the engine's device thread.
Verified: torch 2.13.0 CPU, 0 failures in 50 runs of the reproduction (bench/results/race_cpu_main.json) and
8/8 `--preset race` runs trained; torch 2.11.0 on an H200 with flex_attention, 0/2 probe runs failed and the
trainer finished 2/2 (bench/results/trainer_gpu_2/). There, the eager-backward option alone ends the deadlock
but the FX race still hit (3/3 runs), the seed's thread-local FX flag deadlocked (2/2), and a lock around every
whole step held but serialises warm steps.

From torch 2.13 config values are per thread (ContextVar): every thread that compiles must call
`apply_compile_guard()` itself; calling it in the main thread alone silently does nothing. The gate is keyed
on what the caller says compiles (the trainer: the length bucket); a recompile for another reason (a new dtype,
a failed dynamo guard) would run shared and is not covered: `TORCH_LOGS=recompiles` shows them.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Hashable, Iterator

GUARDS = ("exclusive-compile", "eager-backward", "step-lock", "off")


class SharedExclusiveGate:
    """A readers-writer gate with writer preference: compile steps exclusive, warm steps shared."""

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
_STEP_LOCK = threading.RLock()
_local = threading.local()


def eager_backward_available() -> bool:
    """Whether this torch has `force_non_lazy_backward_lowering`."""
    import torch._functorch.config as fconfig

    return hasattr(fconfig, "force_non_lazy_backward_lowering")


def apply_compile_guard(guard: str = "exclusive-compile") -> None:
    """Set the guard's per-thread torch config; call it at the start of every thread that compiles."""
    if guard in ("exclusive-compile", "eager-backward") and eager_backward_available():
        import torch._functorch.config as fconfig

        fconfig.force_non_lazy_backward_lowering = True


def step_context(guard: str, key: Hashable) -> contextlib.AbstractContextManager:
    """What wraps one whole training step (forward, backward, optimizer) whose compiled graph is `key`."""
    if guard == "step-lock":
        return _STEP_LOCK
    if guard != "exclusive-compile":
        return contextlib.nullcontext()
    seen = _local.__dict__.setdefault("seen", set())
    if key in seen:
        return _GATE.shared()
    seen.add(key)  # the first step on this key compiles: forward now, backward at .backward()
    return _GATE.exclusive()
