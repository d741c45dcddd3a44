import torch


class TinyNet(torch.nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))

    def forward(self, x):
        return self.net(x)
