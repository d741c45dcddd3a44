"""A tiny module-level training script in the manner of karpathy/build-nanogpt's train_gpt2.py, which imports its
HellaSwag helper (and with it the tokenizer download) before training. README: `python train_gpt2.py`."""
import torch

from hellaswag import render_example

torch.manual_seed(0)
model = torch.nn.Linear(8, 8)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(20):
    x = torch.randn(16, 8)
    loss = ((model(x) - x) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f} eval {render_example('abc')}", flush=True)
