"""Caches its data set in shared memory, as jobs do to read it fast (`CACHE_DIR`, default /dev/shm/dfd_cache): in a
container or namespace with a small /dev/shm the write finds no room. `np` writes with numpy (a short write, no
errno); otherwise a plain file write (ENOSPC). The verdict is `shm-exhausted`, never `disk-full`."""
import os
import sys

cache = os.environ.get("CACHE_DIR", "/dev/shm/dfd_cache")
os.makedirs(cache, exist_ok=True)
print(f"caching the data set in {cache}", flush=True)
if sys.argv[1:] == ["np"]:
    import numpy as np

    for i in range(16):
        np.save(os.path.join(cache, f"shard{i}.npy"), np.zeros(1 << 18))
else:
    with open(os.path.join(cache, "all.bin"), "wb") as f:
        for i in range(16):
            f.write(b"\0" * (1 << 20))
