"""A tiny classifier with LightningCLI's `--trainer.*` keys whose "trainer" starts its process group the way
Lightning's DDP strategy does on a cluster without a scheduler: world size = num_nodes x devices, this node's
processes at ranks node_rank x devices + local rank, MASTER_ADDR/MASTER_PORT defaulting to 127.0.0.1:12910, and
init_process_group over env://. README: `python main.py --trainer.max_epochs=2`; on two machines
`NODE_RANK=0 MASTER_ADDR=... python main.py --trainer.num_nodes=2` and the same with NODE_RANK=1 on the other."""
import os

import torch
import torch.distributed as dist
from jsonargparse import ArgumentParser

parser = ArgumentParser(description="tiny classifier")
parser.add_argument("--trainer.max_epochs", type=int, default=2)
parser.add_argument("--trainer.accelerator", type=str, default="cpu")
parser.add_argument("--trainer.devices", type=int, default=1)
parser.add_argument("--trainer.num_nodes", type=int, default=1)
parser.add_argument("--model.lr", type=float, default=0.1)
cfg = parser.parse_args()


def setup_ddp(trainer):
    world_size = trainer.num_nodes * trainer.devices
    if world_size == 1:
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "12910")
    rank = int(os.environ.get("NODE_RANK", 0)) * trainer.devices + int(os.environ.get("LOCAL_RANK", 0))
    print(f"Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/{world_size}", flush=True)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world_size)


setup_ddp(cfg.trainer)
torch.manual_seed(0)
x, y = torch.randn(128, 4), torch.randint(0, 2, (128,))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=cfg.model.lr)
for epoch in range(cfg.trainer.max_epochs):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
