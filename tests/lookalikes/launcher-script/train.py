"""A tiny image classifier trained the way timm's train.py is launched: `./distributed_train.sh N ARGS` runs
torchrun with N processes; each picks its device from --device (default cuda) and, when WORLD_SIZE > 1, starts its
process group with the backend that device calls for (nccl for cuda, gloo otherwise) over env://."""
import argparse
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser(description="tiny image classifier")
parser.add_argument("--data-dir", default="data", help="a torch file train.pt with x and y")
parser.add_argument("--model", default="tiny")
parser.add_argument("-b", "--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--device", default="cuda", help="the device each process uses")
parser.add_argument("--dist-backend", default=None, help="the process group's backend (default: by --device)")


def init_distributed_device(args):
    args.distributed = int(os.environ.get("WORLD_SIZE", 1)) > 1
    args.rank, args.world_size = 0, 1
    if args.distributed:
        backend = args.dist_backend or {"cuda": "nccl"}.get(args.device.split(":")[0], "gloo")
        dist.init_process_group(backend=backend, init_method="env://")
        args.rank, args.world_size = dist.get_rank(), dist.get_world_size()
    if args.device.startswith("cuda"):
        assert torch.cuda.is_available(), f"CUDA is not available but {args.device} was specified."
    return torch.device(args.device)


def main():
    args = parser.parse_args()
    device = init_distributed_device(args)
    data = torch.load(os.path.join(args.data_dir, "train.pt"))
    x, y = data["x"].to(device), data["y"].to(device)
    model = torch.nn.Linear(x.shape[1], 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for i in range(args.rank * args.batch_size, len(x), args.batch_size * args.world_size):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + args.batch_size]), y[i:i + args.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if args.rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
