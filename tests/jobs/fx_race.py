"""Drafter threads that each torch.compile their own step at once, like the seed's DFlash trainer: on the
CPU this raises "Detected that you are using FX to symbolically trace a dynamo-optimized function"
(or its CURRENT_PATCHER sibling), which the main thread re-raises: `fx-trace-race`.

The backend is aot_autograd whose backward compiler traces with make_fx under dynamo's compile lock, as
inductor's compile_fx_backward does (the same as checks/probes/compile_race_probe.py), without inductor's
code generation, so it is fast enough for a test. Silent until it fails, like a trainer stuck compiling.
"""
import sys
import threading

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.convert_frame import compile_lock
from torch.fx.experimental.proxy_tensor import make_fx


def race_backend():
    """aot_autograd with a backward compiler that runs make_fx under dynamo's compile lock."""
    def fw(gm, example_inputs):
        return gm

    def bw(gm, example_inputs):
        with compile_lock:
            make_fx(gm)(*example_inputs)
        return gm

    return aot_autograd(fw_compiler=fw, bw_compiler=bw)


def make_step(index):
    """A compiled step with a code object of its own (dynamo caches per code object)."""
    src = f"def step_{index}(x, w):\n    return (x @ w).relu().sin().sum() * {index + 1}\n"
    scope = {}
    exec(compile(src, f"<drafter-step-{index}>", "exec"), scope)
    fn = torch.compile(scope[f"step_{index}"], backend=race_backend(), dynamic=False)

    def run(n):
        x = torch.randn(n, 8, requires_grad=True)
        w = torch.randn(8, 8, requires_grad=True)
        fn(x, w).backward()
    return run


def trial(base):
    """Four drafter threads start together; return the first exception any of them hit."""
    errors = []
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            run = make_step(base + i)
            barrier.wait(timeout=30)
            for _ in range(3):
                for n in (4, 6):
                    run(n)
        except threading.BrokenBarrierError:
            pass
        except BaseException as exc:  # noqa: BLE001 - the drafter's failure is the trainer's failure
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), name=f"drafter-{i}", daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors[0] if errors else None


for n in range(20):
    err = trial(n * 10)
    if err is not None:
        raise err
sys.exit("no race in 20 trials")
