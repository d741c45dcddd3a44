"""A real GPU training loop with no total in its step line: an MLP on random data, a line every ~0.1 s for
SECONDS (default 120). A launch should call it running once its loop shows (a few seconds after it starts)."""
import sys
import time

import torch

end = time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 120)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
print(f"model on {torch.cuda.get_device_name()}", flush=True)
step = 0
while time.time() < end:
    x = torch.randn(256, 1024, device="cuda")
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    step += 1
    time.sleep(0.01)
