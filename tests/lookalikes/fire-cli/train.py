"""A tiny regression trained from a `fire` command line: `python train.py --lr=0.05 --epochs=3`."""
import fire
import torch


def train(lr: float = 0.1, epochs: int = 2, batch_size: int = 16, device: str = "cpu"):
    """Fit y = 3x + 1 with SGD and print the loss after each epoch."""
    torch.manual_seed(0)
    x = torch.randn(256, 1)
    y = 3 * x + 1
    model = torch.nn.Linear(1, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(epochs):
        for i in range(0, len(x), batch_size):
            loss = torch.nn.functional.mse_loss(model(x[i:i + batch_size].to(device)), y[i:i + batch_size].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    return round(loss.item(), 4)


if __name__ == "__main__":
    fire.Fire(train)
