"""Does importing what compile.race's probe server preloads (torch._dynamo and two more) leave a GPU driver alone,
so that forks made after it can still start CUDA themselves? Run on a machine with a CUDA torch (bench/, the device):
prints one JSON line. Round 18: the probe server preloads them only with a CPU-only torch until this says so."""
import json
import os
import sys
import threading
import time

PRELOAD = ("torch._dynamo", "torch._dynamo.backends.common", "torch.fx.experimental.proxy_tensor")


def mapped(name: str) -> bool:
    with open("/proc/self/maps") as f:
        return any(name in line for line in f)


t0 = time.monotonic()
import torch  # noqa: E402

after_torch = {"threads": threading.active_count(), "os_threads": len(os.listdir("/proc/self/task")),
               "libcuda": mapped("libcuda.so"), "initialized": torch.cuda.is_initialized()}
t1 = time.monotonic()
for name in PRELOAD:
    __import__(name)
t2 = time.monotonic()
after_preload = {"threads": threading.active_count(), "os_threads": len(os.listdir("/proc/self/task")),
                 "libcuda": mapped("libcuda.so"), "initialized": torch.cuda.is_initialized()}
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # the fork, as a probe: CUDA must start here, and a compiled function run on the GPU
    os.close(r)
    try:
        x = torch.ones(1024, device="cuda")
        f = torch.compile(lambda t: (t * 2).sin().sum(), backend="aot_eager")
        v = float(f(x))
        msg = {"child_cuda": True, "value": round(v, 3), "device": torch.cuda.get_device_name(0)}
    except Exception as e:  # noqa: BLE001
        msg = {"child_cuda": False, "error": f"{type(e).__name__}: {e}"[:500]}
    os.write(w, json.dumps(msg).encode())
    os._exit(0)
os.close(w)
child = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    child += chunk
os.waitpid(pid, 0)
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "import_torch_s": round(t1 - t0, 2),
                  "preload_s": round(t2 - t1, 2), "after_torch": after_torch, "after_preload": after_preload,
                  "parent_initialized_at_end": torch.cuda.is_initialized(), "parent_libcuda_at_end": mapped("libcuda.so"),
                  **json.loads(child or b"{}")}))
