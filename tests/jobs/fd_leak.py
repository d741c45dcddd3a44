"""A data loader that opens every sample file and never closes it: after some steps the open-file limit runs
out with `OSError: [Errno 24] Too many open files` (`fd-exhausted`). Started with a low `ulimit -n`."""
import os
import sys
import tempfile

root = tempfile.mkdtemp(prefix="fd_leak_")
for i in range(8):
    with open(os.path.join(root, f"sample{i}.txt"), "w") as f:
        f.write("0 1 2 3\n")


cache = []  # keeps every file object alive, so none is closed by the garbage collector: the bug


def load(i):
    f = open(os.path.join(root, f"sample{i % 8}.txt"))
    cache.append(f)
    return [int(x) for x in f.readline().split()]


print("training", flush=True)
for step in range(100000):
    batch = [load(step * 4 + j) for j in range(4)]
    if step % 10 == 0:
        print(f"step {step} loss {sum(batch[0]) / (step + 1):.3f}", flush=True)
sys.exit(0)
