"""Trains a few steps, then asks the GPU for more than it has free: torch.OutOfMemoryError (`cuda-oom`)."""
import torch

x = torch.randn(4096, 4096, device="cuda")
for step in range(5):
    x = x @ x.T / 4096
    print(f"step {step} loss {x.abs().mean().item():.4f}", flush=True)
free, total = torch.cuda.mem_get_info()
activations = torch.empty(int(free * 1.5) // 4, dtype=torch.float32, device="cuda")  # a too-large batch
