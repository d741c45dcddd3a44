"""The fixed variant of bench/issue12_flex.py: the lines compile.race's fix shows, added to the thread function.

Issue 12's repro, as a user wrote it: four threads, each compiling flex_attention forward + backward, with
`force_non_lazy_backward_lowering` set only inside an `if` that is not taken. On a GPU it deadlocks; `dfdoctor
check` used to call it guarded. bench/issue12_flex_guarded.py is the same with the fix's lines added."""
import os
import threading

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from dfdoctor.guard import compile_guard

if os.environ.get("EAGER_BACKWARD") == "1":  # never set in the runs: the flag is mentioned, not applied
    import torch._functorch.config as fconfig
    fconfig.force_non_lazy_backward_lowering = True

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def causal(b, h, q, kv):
    return q >= kv


def drafter(i: int) -> None:
    attend = torch.compile(flex_attention)
    for step in range(6):
        n = (128, 256)[step % 2]
        q, k, v = (torch.randn(1, 4, n, 64, device=DEVICE, requires_grad=True) for _ in range(3))
        mask = create_block_mask(causal, 1, 1, n, n, device=DEVICE)
        with compile_guard(n):
            attend(q, k, v, block_mask=mask).sum().backward()
        print(f"drafter {i} step {step} len {n}", flush=True)


threads = [threading.Thread(target=drafter, args=(i,), name=f"drafter-{i}") for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done", flush=True)
