"""A tiny digit classifier in the manner of pytorch/examples mnist/main.py: the data set downloads itself into
--data-dir on first use (`download=True`). README: `python main.py --epochs 1`."""
import argparse

import torch
from torch.utils.data import DataLoader

from digits import TinyDigits

parser = argparse.ArgumentParser(description="tiny digits")
parser.add_argument("--data-dir", default="../data", help="where the data set is (downloaded when missing)")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.1)


def main():
    args = parser.parse_args()
    train = TinyDigits(args.data_dir, train=True, download=True)
    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True)
    model = torch.nn.Linear(train.x.shape[1], 10)
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
