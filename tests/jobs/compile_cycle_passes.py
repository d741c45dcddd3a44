"""The compile-lock cycle of compile_deadlock.py, passing through: every 2.5 s drafter-0 holds the compile lock
for 0.8 s while it waits on the autograd engine (stand-ins for torch's frames), and the main thread, printing its
steps, waits for that lock meanwhile. One look at the stacks shows the cycle about one time in four (10 of 40
py-spy dumps here); two looks a second apart never both do (a second look 1.0-1.7 s after the first lands
between two holds). It is not stuck: a watch must say running, never compile-deadlock."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "deadlock_fake"))
from torch import autograd  # noqa: E402  (the stand-in, not the real torch)
from torch._dynamo import convert_frame  # noqa: E402

HOLD_S, BETWEEN_S = 0.8, 1.7


def drafter():
    while True:
        autograd._engine_done.clear()
        threading.Timer(HOLD_S, autograd._engine_done.set).start()  # the engine answers after HOLD_S
        convert_frame._compile(autograd.grad)  # holds compile_lock until it does
        time.sleep(BETWEEN_S)


threading.Thread(target=drafter, name="drafter-0", daemon=True).start()
for step in range(1, 3000):
    print(f"step {step}", flush=True)
    convert_frame.ConvertFrame()()  # waits for compile_lock while drafter-0 holds it
    time.sleep(0.2)
