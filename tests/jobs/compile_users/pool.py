from concurrent.futures import ThreadPoolExecutor
import torch
from dfdoctor.guard import compile_guard

@torch.compile
def step(x):
    return x.sin().sum()

def work(x):
    if x.shape[0] > 2:
        with compile_guard(x.shape):
            step(x).backward()
    else:
        step(x).backward()

with ThreadPoolExecutor(4) as ex:
    list(ex.map(work, [torch.randn(4)] * 8))
