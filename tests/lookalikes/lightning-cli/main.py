"""A tiny classifier whose command line is a jsonargparse parser with LightningCLI's `--trainer.*`, `--model.*` and
`--data.*` keys: `python main.py --trainer.max_epochs=2 --model.lr=0.1`."""
import torch
from jsonargparse import ArgumentParser

parser = ArgumentParser(description="tiny classifier")
parser.add_argument("--trainer.max_epochs", type=int, default=2)
parser.add_argument("--trainer.accelerator", type=str, default="cpu")
parser.add_argument("--trainer.devices", type=int, default=1)
parser.add_argument("--model.lr", type=float, default=0.1)
parser.add_argument("--data.batch_size", type=int, default=16)
cfg = parser.parse_args()

torch.manual_seed(0)
x, y = torch.randn(128, 4), torch.randint(0, 2, (128,))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=cfg.model.lr)
for epoch in range(cfg.trainer.max_epochs):
    for i in range(0, len(x), cfg.data.batch_size):
        loss = torch.nn.functional.cross_entropy(model(x[i:i + cfg.data.batch_size]), y[i:i + cfg.data.batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
