"""A tiny regressor trained by steps, in the manner of trainers that cycle their loaders forever
(`def cycle(dl): while True: for data in dl: yield data`, as denoising-diffusion-pytorch's Trainer does) and hold
out --val-split of the data for validation every --eval-every steps. README: `python train.py --steps 200`."""
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset, random_split

parser = argparse.ArgumentParser(description="tiny step trainer")
parser.add_argument("--data", default="data/train.pt", help="a torch file with x and y")
parser.add_argument("--val-split", type=float, default=0.1, help="fraction of the data held out for validation")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--eval-every", type=int, default=50)
parser.add_argument("--lr", type=float, default=0.05)


def cycle(dl):
    while True:
        for data in dl:
            yield data


def main():
    args = parser.parse_args()
    data = torch.load(args.data)
    full = TensorDataset(data["x"], data["y"])
    n_val = int(len(full) * args.val_split)
    train_set, val_set = random_split(full, [len(full) - n_val, n_val], torch.Generator().manual_seed(0))
    train_dl = cycle(DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True))
    val_dl = cycle(DataLoader(val_set, batch_size=args.batch_size, drop_last=True))
    model = torch.nn.Linear(data["x"].shape[1], 1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step in range(1, args.steps + 1):
        x, y = next(train_dl)
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.eval_every == 0:
            with torch.no_grad():
                vx, vy = next(val_dl)
                val = torch.nn.functional.mse_loss(model(vx).squeeze(1), vy)
            print(f"step {step} loss {loss.item():.4f} val {val.item():.4f}")


if __name__ == "__main__":
    main()
