"""A tiny regression whose `--device` defaults to cuda and whose noise comes from a generator on that device, as
trainers that seed per device do: `python train.py --epochs 2` on a GPU machine."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda", help="cuda or cpu")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

gen = torch.Generator(device=args.device).manual_seed(args.seed)
x = torch.randn(256, 1, generator=gen, device=args.device)
y = 3 * x + 1
model = torch.nn.Linear(1, 1).to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
