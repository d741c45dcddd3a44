"""Drafter threads that each torch.compile their own step at once, like the seed's DFlash trainer: on the
CPU this raises "Detected that you are using FX to symbolically trace a dynamo-optimized function"
(or its CURRENT_PATCHER sibling), which the main thread re-raises: `fx-trace-race`.

The compile backend is the one of checks/probes/compile_race_probe.py (aot_autograd whose backward is
traced by make_fx under dynamo's compile lock, as inductor does), fast enough for a test.
"""
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "checks", "probes"))
from compile_race_probe import make_step  # noqa: E402

import torch  # noqa: E402,F401

print("starting 4 drafter threads", flush=True)
for trial in range(20):
    errors = []
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            run, shapes = make_step(trial * 10 + i, "race", "cpu")
            barrier.wait(timeout=30)
            for _ in range(3):
                for n in shapes:
                    run(n)
        except threading.BrokenBarrierError:
            pass
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
print("no race in 20 trials")
