import threading, os
import torch
from torch.nn.attention.flex_attention import flex_attention
from helpers import train_loop

if os.environ.get("EAGER_BW"):
    import torch._functorch.config as c
    c.force_non_lazy_backward_lowering = True

lock = threading.Lock()
def drafter(i):
    fn = torch.compile(flex_attention)
    train_loop(fn)

for i in range(4):
    threading.Thread(target=drafter, args=(i,)).start()
