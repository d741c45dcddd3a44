"""Loads a kernel built only for sm_80 (a cubin, no PTX) on a GPU of another architecture: no kernel image is
available (`cuda-error`). The cubin is built by bench/gpu_runtime.sh with nvcc."""
import sys

import cupy as cp

mod = cp.RawModule(path=sys.argv[1])
print("loaded module", flush=True)
f = mod.get_function("k")
f((1,), (1,), (cp.zeros(1, dtype=cp.float32),))
cp.cuda.runtime.deviceSynchronize()
