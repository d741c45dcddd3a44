"""The fix for the concurrent-compile causes (fx-trace-race, compile-deadlock): the lines to add to the user's
own thread function, using the proven guard `dfdoctor.guard`. The bundled trainer is named only when it is
the launched program. Measured (docs/guard.md): a lock around the first call or around each compiled call,
the config flag `force_non_lazy_backward_lowering` alone (on torch 2.11), or a thread-local FX flag does not
help on a GPU; a lock around whole steps deadlocks threads that hand data to each other inside their steps.
"""

from __future__ import annotations

from typing import Sequence

TRAINER_MODULE = "dfdoctor.trainer"

_LINES = ("    from dfdoctor.guard import compile_guard\n"
          "    ...\n"
          "    with compile_guard(x.shape):   # each step, from the thread's first compiled call on\n"
          "        loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()")


def fix_for(trainer: bool = False, functions: Sequence[str] = ()) -> str:
    """What to do: the two lines in the thread's function (named when known), or the trainer's switch."""
    if trainer:
        return ("The bundled trainer applies the proven guard (dfdoctor.guard.compile_guard) by default: drop "
                "--no-compile-guard or --compile-guard OTHER. A lock around each call does not help.")
    where = f"in {', '.join(functions)}" if functions else "in each thread function that runs compiled code"
    return (f"Wrap every training step {where} in the proven guard (pip install dfdoctor in the training "
            f"environment, or copy its one file dfdoctor/guard.py):\n{_LINES}\n"
            "It gates only torch's compiling: steps run in parallel, may nest and may wait on each other "
            "(docs/guard.md). A lock around the first call, each call or each whole step does not do this.")


def is_trainer(argv: Sequence[str]) -> bool:
    """Whether the launched command runs the bundled trainer (`-m dfdoctor.trainer`, or its launch.sh)."""
    words = [str(w) for w in argv]
    return any(w in (TRAINER_MODULE, f"{TRAINER_MODULE}.__main__") or w.endswith("trainer/launch.sh")
               or w.endswith("dfdoctor/trainer/__main__.py") for w in words)


COMPILE_GUARD_FIX = fix_for()
