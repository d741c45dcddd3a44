import threading
import torch
from model import Net
from dfdoctor.guard import compile_guard

def worker(i):
    model = torch.compile(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        x = torch.randn(8, 16)
        with compile_guard(x.shape):
            loss = model(x).sum()
            loss.backward()
            opt.step()

threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
