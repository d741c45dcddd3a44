"""torchrun (gloo, CPU): rank 1 is held up before init_process_group, so rank 0 waits there for it forever
(the default timeout is 30 minutes): `rank-missing`, naming rank 1 and its line (`slow0`: rank 0 works 4 s first)."""
import os
import time

if os.environ.get("RANK") == "1":
    time.sleep(600)  # rank 1 never arrives
if os.environ.get("RANK") == "2":  # a third rank, where one is run: it ends (exit 0) before init_process_group
    raise SystemExit(0)
if os.environ.get("RANK") == "0":
    import sys
    if "slow0" in sys.argv:  # rank 0 still on its way for 4 s, working (as `import torch` on a loaded machine)
        start = time.monotonic()
        while time.monotonic() - start < 4:
            pass
import torch.distributed as dist

dist.init_process_group("gloo")
print("joined", flush=True)
