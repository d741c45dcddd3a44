"""Compiles a model with torch.compile before its first line (silent for a long while, working), then prints a
step every 0.1 s: a healthy slow start, `running`."""
import time

import torch

model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)])
step_fn = torch.compile(model)
x = torch.randn(8, 64)
for step in range(100000):
    y = step_fn(x).sum().item()
    print(f"step {step}: loss {y:.3f}", flush=True)
    time.sleep(0.1)
