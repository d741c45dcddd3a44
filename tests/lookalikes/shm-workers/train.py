"""A tiny classifier fed by a DataLoader with worker processes, the way pytorch/examples' imagenet trainer feeds
its model (`-j/--workers`, default 4, handed to DataLoader(num_workers=...)). README: `python train.py --epochs 2`.
In a container started without --shm-size, /dev/shm is 64 MB and the workers' queues and batches live there."""
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="tiny trainer with DataLoader workers")
parser.add_argument("-j", "--workers", default=4, type=int, help="number of data loading workers")
parser.add_argument("-b", "--batch-size", default=16, type=int)
parser.add_argument("--epochs", default=2, type=int)
parser.add_argument("--lr", default=0.1, type=float)


def main():
    args = parser.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(128, 8), torch.randint(0, 2, (128,)))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
