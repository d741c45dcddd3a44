"""A custom kernel (CuPy RawKernel) that writes far outside its buffer, then torch touches the GPU: an illegal
memory access (`cuda-error`)."""
import cupy as cp
import torch

k = cp.RawKernel(r'extern "C" __global__ void k(float* p) { p[(size_t)1 << 36] = 1.0f; }', "k")
buf = cp.zeros(16, dtype=cp.float32)
print("step 0", flush=True)
k((1,), (1,), (buf,))
torch.cuda.synchronize()
print(torch.ones(4, device="cuda").sum().item(), flush=True)
