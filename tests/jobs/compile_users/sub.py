import threading, torch
from dfdoctor.guard import compile_guard
class Drafter(threading.Thread):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Linear(4, 4)
        self.model.compile()
    def run(self):
        for _ in range(3):
            x = torch.randn(2, 4)
            with compile_guard(x.shape):
                self.model(x).sum().backward()
for _ in range(4):
    Drafter().start()
