"""A compile backend that widens the concurrent-compile race window, so the crash shows on CPU in seconds.

`fx-race-window` is aot_autograd whose backward compiler runs `make_fx` under dynamo's compile lock, which is
what inductor's `compile_fx_backward` does whenever a post-grad pattern matches, minus the code generation.
With inductor on CPU that trace lasts ~7 ms per backward, so unguarded threads rarely collide; here every lazy
backward compile traces, and `--no-compile-guard` crashes within seconds. The forward runs as traced (eager).
"""

from __future__ import annotations

from typing import Callable

RACE_WINDOW = "fx-race-window"


def resolve_backend(name: str) -> str | Callable:
    """The torch.compile backend for a name: ours for `fx-race-window`, else the name itself."""
    if name != RACE_WINDOW:
        return name
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.convert_frame import compile_lock
    from torch.fx.experimental.proxy_tensor import make_fx

    def forward(gm, example_inputs):
        """Run the forward graph as traced."""
        return gm

    def backward(gm, example_inputs):
        """Trace the backward with make_fx under the compile lock, then run it as traced."""
        with compile_lock:
            make_fx(gm)(*example_inputs)
        return gm

    return aot_autograd(fw_compiler=forward, bw_compiler=backward)
