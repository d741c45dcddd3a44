"""Reproduce the concurrent torch.compile race in this interpreter: one trial, one JSON answer.

Several threads start together at a barrier; each owns a compiled function, runs forward and backward
and recompiles (two shapes). AOTAutograd compiles a backward lazily at the first `.backward()`, outside
dynamo's compile, and the FX tracer it uses sets the process-global `_is_fx_tracing_flag`; a thread that
enters its compiled function at that moment gets "Detected that you are using FX to symbolically trace a
dynamo-optimized function". Two overlapping FX traces trip the sibling `CURRENT_PATCHER` assertion.

Backends: `race` (default) is aot_autograd with a backward compiler that runs `make_fx` under dynamo's
compile lock, as inductor's `compile_fx_backward` does, without inductor's code generation, so it is fast;
`inductor` is the real thing; `flex` is the real thing with flex_attention (where a GPU deadlocks).
With `--guard NAME` each worker applies a candidate fix; bare `--guard` is the public guard
(`exclusive-compile`): `dfdoctor.guard.compile_guard` around each step, exactly as the fix tells users to
write it, imported as the training code would import it (`import dfdoctor.guard`), or, where this
interpreter has no dfdoctor, loaded from the guard module's file that dfdoctor ships beside the probe.

A trial that stops making progress is ended at `--deadline`: every thread's stack is dumped with
faulthandler into the answer, and the process exits at once (stuck threads cannot be joined).
Standard library at import time; torch is imported only in `main`.
"""

import argparse
import contextlib
import faulthandler
import hashlib
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_support import answer, install_stack_dump  # noqa: E402

GUARDS = ("none", "exclusive-compile", "eager-backward", "step-lock", "thread-local-flag")
FX_RACE_MARKERS = ("Detected that you are using FX to symbolically trace",
                   "CURRENT_PATCHER is None")


def parse_args(argv: List[str]) -> argparse.Namespace:
    """The trial's shape: backend, threads, steps, guard and deadline."""
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=("race", "inductor", "flex"), default="race")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--steps", type=int, default=3, help="passes over the shapes per thread")
    p.add_argument("--guard", nargs="?", const="exclusive-compile", default="none", choices=GUARDS,
                   help="the fix to try (bare --guard: exclusive-compile, the trainer's compile guard)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--deadline", type=float, default=20.0, help="seconds before a stuck trial is dumped")
    p.add_argument("--guard-file", default="", help="dfdoctor/guard.py, used where `import dfdoctor.guard` fails "
                   "(relative: beside this probe)")
    return p.parse_args(argv)


def load_guard(guard_file: str):
    """The public guard `dfdoctor.guard` as the training code would import it; where this interpreter cannot
    import dfdoctor, the same module's file that dfdoctor shipped beside this probe (stdlib + torch only)."""
    try:
        import dfdoctor.guard as guard

        return guard, "import"
    except Exception as exc:  # not installed here, or its package broken: prove the shipped file instead
        if not guard_file:
            raise RuntimeError(f"dfdoctor.guard cannot be imported here ({exc}) and no --guard-file was given")
    import importlib.util

    path = guard_file if os.path.isabs(guard_file) else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     guard_file)
    spec = importlib.util.spec_from_file_location("dfdoctor_guard", path)
    guard = importlib.util.module_from_spec(spec)
    sys.modules["dfdoctor_guard"] = guard
    spec.loader.exec_module(guard)
    return guard, "file"


def eager_backward() -> None:
    """The config flag alone, per thread (a candidate fix; torch's config is per thread from 2.13 on)."""
    import torch._functorch.config as fconfig

    if hasattr(fconfig, "force_non_lazy_backward_lowering"):
        fconfig.force_non_lazy_backward_lowering = True


def patch_thread_local_flag() -> None:
    """A candidate fix that does not hold: the FX tracing flag per thread (fixes the CPU crash, not the deadlock)."""
    import torch
    import torch._dynamo.eval_frame  # noqa: F401 (reads the flag through this module attribute)
    from torch.fx import _symbolic_trace as st

    local = threading.local()
    original = st.Tracer.trace

    def trace(self, *args, **kwargs):
        """Tracer.trace with a per-thread flag instead of the global one."""
        prior = getattr(local, "on", False)
        local.on = True
        try:
            return original(self, *args, **kwargs)
        finally:
            local.on = prior

    st.Tracer.trace = trace
    st.is_fx_symbolic_tracing = lambda: getattr(local, "on", False) and not torch.compiler.is_compiling()


def race_backend():
    """aot_autograd whose backward compiler traces with make_fx under dynamo's compile lock."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.convert_frame import compile_lock
    from torch.fx.experimental.proxy_tensor import make_fx

    def fw(gm, example_inputs):
        """Run the forward graph as traced."""
        return gm

    def bw(gm, example_inputs):
        """Trace the backward with make_fx under the compile lock."""
        with compile_lock:  # as inductor's compile_fx_backward does
            make_fx(gm)(*example_inputs)
        return gm

    return aot_autograd(fw_compiler=fw, bw_compiler=bw)


def make_step(index: int, backend: str, device: str):
    """A compiled function with a code object of its own (dynamo caches per code object)."""
    import torch

    if backend == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def causal(b, h, q, kv):
            """Causal visibility."""
            return q >= kv

        src = (f"def step_{index}(q, k, v, mask):\n"
               f"    return flex_attention(q, k, v, block_mask=mask).sin().sum() * {index + 1}\n")
        scope = {"flex_attention": flex_attention}
        exec(compile(src, f"<race-step-{index}>", "exec"), scope)
        fn = torch.compile(scope[f"step_{index}"], backend="inductor")

        def run(n: int):
            """One forward + backward on inputs of length n."""
            q, k, v = (torch.randn(1, 2, n, 16, device=device, requires_grad=True) for _ in range(3))
            mask = create_block_mask(causal, 1, 1, n, n, device=device)
            fn(q, k, v, mask).backward()
        return run, (128, 256)

    src = (f"def step_{index}(x, w):\n"
           f"    return (x @ w).relu().sin().sum() * {index + 1}\n")
    scope: dict = {}
    exec(compile(src, f"<race-step-{index}>", "exec"), scope)
    fn = torch.compile(scope[f"step_{index}"], backend=race_backend() if backend == "race" else "inductor",
                       dynamic=False)

    def run(n: int):
        """One forward + backward on inputs of length n."""
        x = torch.randn(n, 8, device=device, requires_grad=True)
        w = torch.randn(8, 8, device=device, requires_grad=True)
        fn(x, w).backward()
    return run, (4, 6)


def classify_error(text: str) -> str:
    """Name what a worker's exception was: the FX race, its CURRENT_PATCHER sibling, or something else."""
    if FX_RACE_MARKERS[0] in text:
        return "fx-nested-trace"
    if FX_RACE_MARKERS[1] in text:
        return "fx-current-patcher"
    return "other"


def dump_stacks() -> str:
    """Every thread's Python stack, as faulthandler writes it."""
    with tempfile.TemporaryFile(mode="w+") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        return f.read()


def main(argv: List[str]) -> int:
    """Run one trial and answer with what happened in every thread."""
    args = parse_args(argv)
    install_stack_dump()
    preloaded = "torch._dynamo" in sys.modules  # imported by the probe server before this fork
    if args.backend != "race":
        # a warm cache would skip the very compiles that race; read when torch is imported
        os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
    t_import = time.monotonic()
    import torch

    base = {"torch": torch.__version__, "backend": args.backend, "threads": args.threads,
            "guard": args.guard, "device": args.device, "python": sys.version.split()[0],
            "import_s": round(time.monotonic() - t_import, 2), "dynamo_preloaded": preloaded}
    barrier = threading.Barrier(args.threads)
    progress = [0] * args.threads
    errors: List[dict] = []
    started = [0.0]
    lock = threading.Lock()

    step_lock = threading.Lock() if args.guard == "step-lock" else contextlib.nullcontext()
    guard = None
    if args.guard == "exclusive-compile":
        guard, how = load_guard(args.guard_file)
        with open(guard.__file__, "rb") as f:
            base["guard_module"] = {"how": how, "file": guard.__file__, "sha256": hashlib.sha256(f.read()).hexdigest(),
                                    "proven_torch": guard.proven_here() is None}
    if args.guard == "thread-local-flag":
        patch_thread_local_flag()
    step_times: List[float] = []

    def worker(i: int) -> None:
        """One thread: wait at the barrier, then step over the shapes; record any failure."""
        try:
            if args.guard == "eager-backward":
                eager_backward()
            run, shapes = make_step(i, args.backend, args.device)
            barrier.wait(timeout=max(args.deadline, 1.0))
            for rep in range(args.steps):
                for n in shapes:
                    t = time.monotonic()
                    if guard is not None:  # as docs/guard.md and the fix say: the whole step, keyed on its shape
                        ctx = guard.compile_guard(n, allow_unproven=True)
                    else:
                        ctx = step_lock
                    with ctx:
                        run(n)
                    progress[i] += 1
                    if rep == args.steps - 1:
                        step_times.append(time.monotonic() - t)  # warm: the last pass over the shapes
        except threading.BrokenBarrierError:
            return
        except BaseException as exc:  # every failure is data for the verdict
            text = f"{type(exc).__name__}: {exc}"
            with lock:
                errors.append({"thread": i, "kind": classify_error(text), "error": text[:500],
                               "t": round(time.monotonic() - started[0], 3),
                               "traceback": "".join(traceback.format_exception(exc))[-4000:]})
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), name=f"drafter-{i}", daemon=True)
               for i in range(args.threads)]
    started[0] = time.monotonic()
    for t in threads:
        t.start()
    deadline = started[0] + args.deadline
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    elapsed = round(time.monotonic() - started[0], 3)
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        answer({**base, "outcome": "hang", "elapsed_s": elapsed, "stuck": stuck, "progress": progress,
                "errors": errors, "stacks": dump_stacks()})
        sys.stdout.flush()
        os._exit(3)  # the stuck threads hold locks: exiting normally would wait for them forever
    kinds = sorted({e["kind"] for e in errors})
    outcome = ("race" if any(k != "other" for k in kinds) else "error") if errors else "ok"
    answer({**base, "outcome": outcome, "elapsed_s": elapsed, "progress": progress, "errors": errors,
            "first_error_s": min((e["t"] for e in errors), default=None), "kinds": kinds,
            "warm_step_s": round(sorted(step_times)[len(step_times) // 2], 5) if step_times else None})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
