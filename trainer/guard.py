"""The trainer's `--compile-guard` choices. The default, `exclusive-compile`, is the public API
`dfdoctor.guard` (the same code users put in their own thread functions); the others exist to compare
candidates (bench/race.py, docs/trainer.md): `step-lock` serialises every whole step, `eager-backward` sets
only the config flag, `off` is the reference pipeline's unguarded code path
(docs/trainer.md).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Hashable

from dfdoctor.guard import compile_guard, setup_thread

GUARDS = ("exclusive-compile", "eager-backward", "step-lock", "off")
_STEP_LOCK = threading.RLock()


def apply_compile_guard(guard: str = "exclusive-compile") -> None:
    """The per-thread torch settings of the chosen guard; call it at the start of every thread that compiles."""
    if guard == "exclusive-compile":
        setup_thread()
    elif guard == "eager-backward":
        import torch._functorch.config as fconfig

        if hasattr(fconfig, "force_non_lazy_backward_lowering"):
            fconfig.force_non_lazy_backward_lowering = True


def step_context(guard: str, key: Hashable) -> contextlib.AbstractContextManager:
    """What wraps one whole training step (forward, backward, optimizer) whose compiled graph is `key`."""
    if guard == "exclusive-compile":
        return compile_guard(key)
    if guard == "step-lock":
        return _STEP_LOCK
    return contextlib.nullcontext()
