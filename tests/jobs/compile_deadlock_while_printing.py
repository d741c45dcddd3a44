"""The compile-lock cycle of compile_deadlock.py (stand-ins for torch's frames: drafter-0 holds the compile lock
and waits on the autograd engine; the main thread waits for the compile lock) while another drafter thread still
prints its steps, as the bundled trainer without its guard does on an H200: its output keeps growing, so only
the stacks tell that it is stuck. A launch must name compile-deadlock, never say running."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "deadlock_fake"))
from torch._dynamo import convert_frame  # noqa: E402  (the stand-in, not the real torch)
from torch.autograd import grad  # noqa: E402


def still_printing():
    for step in range(1, 1000):
        print(f"drafter-1 step {step} loss {1.0 / step:.4f}", flush=True)
        time.sleep(0.2)


threading.Thread(target=still_printing, name="drafter-1", daemon=True).start()
drafter = threading.Thread(target=convert_frame._compile, args=(grad,), name="drafter-0", daemon=True)
drafter.start()
time.sleep(0.2)
convert_frame.ConvertFrame()()
