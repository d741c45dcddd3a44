"""Sits in the compile-lock cycle (`compile-deadlock`) with stand-ins for torch's frames: a drafter thread
holds the compile lock and waits on the autograd engine; the main thread waits for the compile lock."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "deadlock_fake"))
from torch._dynamo import convert_frame  # noqa: E402  (the stand-in, not the real torch)
from torch.autograd import grad  # noqa: E402

drafter = threading.Thread(target=convert_frame._compile, args=(grad,), name="drafter-0", daemon=True)
drafter.start()
time.sleep(0.2)
convert_frame.ConvertFrame()()
