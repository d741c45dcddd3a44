"""Probe for cuda.init, run in the TRAINING interpreter: can torch use the GPUs, and what stands in the way?

Standard library plus torch only. It records the facts that need no CUDA context (device nodes, driver,
the visibility variables, NVML's device list) in a side thread while `import torch` runs, then initialises
CUDA and, on every visible device, allocates, multiplies and synchronises. A torch whose own torch/version.py
says it is built with neither CUDA nor HIP can use no GPU here, whatever the machine has: that build is
recorded as read from the file, without importing torch (about a CPU-second; `_torch_build`). The answer is rewritten after
every stage, so when dfdoctor kills a hung probe the last answer names the stage it hung in.
"""

import ctypes
import glob
import os
import re
import subprocess
import sys
import threading
import time
import traceback
from typing import List

import _probe_support as support
import _torch_build

T0 = time.monotonic()
STATE: dict = {"stage": "start", "stages": [], "pid": os.getpid(), "python": sys.executable,
               "host": os.uname().nodename,
               "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                                                      "CUDA_DEVICE_ORDER", "PYTORCH_NVML_BASED_CUDA_CHECK")}}
_LOCK = threading.Lock()


def stage(name: str) -> None:
    """Enter a stage and publish it, so a kill at the deadline still says where the probe was."""
    with _LOCK:
        STATE["stage"] = name
        STATE["stages"].append([name, round(time.monotonic() - T0, 3)])
        support.answer(STATE)


def publish(**facts) -> None:
    """Merge facts into the answer and rewrite it."""
    with _LOCK:
        STATE.update(facts)
        support.answer(STATE)


def error_text(exc: BaseException) -> str:
    """The exception as one short line: its type and the first lines of its message."""
    msg = " ".join(str(exc).split("\n")[:3]).strip()
    return f"{type(exc).__name__}: {msg}"[:800]


# ---- facts that need no CUDA context (run beside `import torch`) ----------------------------------------

def device_nodes() -> List[str]:
    """The /dev/nvidia* nodes present (a container often lacks them)."""
    return sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*"))


def proc_driver() -> dict:
    """The kernel driver's version and the GPUs it knows, from /proc/driver/nvidia (no library needed)."""
    out: dict = {}
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", f.read())
            out["kernel_module"] = m.group(1) if m else None
    except OSError:
        return out
    gpus = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        fields = {}
        try:
            with open(info) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    fields[key.strip()] = value.strip()
        except OSError:
            continue
        gpus.append({"name": fields.get("Model"), "uuid": fields.get("GPU UUID"),
                     "bus": fields.get("Bus Location"), "minor": fields.get("Device Minor")})
    out["gpus"] = gpus
    return out


def libcuda() -> dict:
    """The CUDA version the installed driver supports, asked of libcuda without creating a context."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {"loadable": False, "error": str(exc)}
    v = ctypes.c_int(0)
    rc = lib.cuDriverGetVersion(ctypes.byref(v))
    return {"loadable": True, "driver_cuda": f"{v.value // 1000}.{(v.value % 1000) // 10}" if rc == 0 else None}


def nvml() -> dict:
    """Every physical GPU with its memory and the processes holding it, via NVML (nvidia-ml-py) or nvidia-smi."""
    try:
        import pynvml  # nvidia-ml-py; optional
    except Exception:
        return smi()
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return {"source": "nvml", "error": error_text(exc)}
    try:
        def s(x):
            return x.decode() if isinstance(x, bytes) else x
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                procs = [{"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) // 2**20}
                         for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
            except Exception:
                procs = None
            gpus.append({"index": i, "name": s(pynvml.nvmlDeviceGetName(h)), "uuid": s(pynvml.nvmlDeviceGetUUID(h)),
                         "total_mib": mem.total // 2**20, "used_mib": mem.used // 2**20, "processes": procs})
        return {"source": "nvml", "driver": s(pynvml.nvmlSystemGetDriverVersion()), "gpus": gpus}
    except Exception as exc:
        return {"source": "nvml", "error": error_text(exc)}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def smi() -> dict:
    """The same facts from nvidia-smi, when NVML's Python binding is not installed."""
    query = ["nvidia-smi", "--query-gpu=index,name,uuid,memory.total,memory.used,driver_version",
             "--format=csv,noheader,nounits"]
    try:
        res = subprocess.run(query, capture_output=True, text=True, timeout=8)
    except FileNotFoundError:
        return {"source": "nvidia-smi", "error": "nvidia-smi is not on PATH"}
    except (subprocess.TimeoutExpired, OSError) as exc:
        return {"source": "nvidia-smi", "error": error_text(exc)}
    if res.returncode != 0:
        return {"source": "nvidia-smi", "error": (res.stdout + res.stderr).strip()[:500]}
    gpus, driver = [], None
    for line in res.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6:
            continue
        gpus.append({"index": int(parts[0]), "name": parts[1], "uuid": parts[2],
                     "total_mib": _int(parts[3]), "used_mib": _int(parts[4]), "processes": None})
        driver = parts[5]
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=8)
        by_uuid: dict = {}
        for line in apps.stdout.strip().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 3:
                by_uuid.setdefault(parts[0], []).append({"pid": _int(parts[1]), "used_mib": _int(parts[2])})
        if apps.returncode == 0:
            for g in gpus:
                g["processes"] = by_uuid.get(g["uuid"], [])
    except (subprocess.TimeoutExpired, OSError):
        pass
    return {"source": "nvidia-smi", "driver": driver, "gpus": gpus}


def _int(s: str):
    try:
        return int(float(s))
    except ValueError:
        return None


def host_facts() -> None:
    """Collect everything that needs no CUDA context; runs in a thread beside `import torch`."""
    facts = {"dev_nodes": device_nodes(), "proc_driver": proc_driver(), "libcuda": libcuda()}
    publish(**facts)
    publish(physical=nvml())


# ---- torch and CUDA -------------------------------------------------------------------------------------

def torch_facts(torch) -> dict:
    """What the torch build is and was compiled for."""
    facts = {"version": torch.__version__, "cuda": getattr(torch.version, "cuda", None),
             "hip": getattr(torch.version, "hip", None), "file": getattr(torch, "__file__", None)}
    try:
        facts["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:
        facts["arch_list"] = []
    return facts


def probe_device(torch, i: int) -> dict:
    """Initialise one device and prove it computes: properties, an allocation, a matmul, a synchronize."""
    d: dict = {"index": i}
    stage(f"device {i}: properties")
    p = torch.cuda.get_device_properties(i)
    d.update(name=p.name, capability=f"{p.major}.{p.minor}", sm=f"sm_{p.major}{p.minor}",
             total_mib=p.total_memory // 2**20, multiprocessors=p.multi_processor_count,
             uuid=str(getattr(p, "uuid", "")) or None)
    try:
        stage(f"device {i}: context")
        t = time.monotonic()
        with torch.cuda.device(i):
            free, total = torch.cuda.mem_get_info(i)
            d["free_mib"] = free // 2**20
            d["context_s"] = round(time.monotonic() - t, 3)
            stage(f"device {i}: allocation")
            x = torch.ones(1 << 20, device=f"cuda:{i}")  # 4 MiB
            stage(f"device {i}: matmul")
            t = time.monotonic()
            a = torch.arange(64 * 64, device=f"cuda:{i}", dtype=torch.float32).reshape(64, 64) / 4096
            prod = a @ torch.eye(64, device=f"cuda:{i}")
            stage(f"device {i}: synchronize")
            torch.cuda.synchronize(i)
            d["matmul_ok"] = bool(torch.equal(prod, a)) and float(x.sum().item()) == float(1 << 20)
            d["matmul_s"] = round(time.monotonic() - t, 3)
            d["bf16"] = bool(torch.cuda.is_bf16_supported()) if p.major >= 8 else False
            d["reserved_mib"] = torch.cuda.memory_reserved(i) // 2**20
    except Exception as exc:
        d["error"] = error_text(exc)
        d["failed_stage"] = STATE["stage"]
    return d


def main() -> int:
    """Run the stages in order, publishing the answer after each."""
    support.install_stack_dump()
    stage("start")
    side = threading.Thread(target=host_facts, name="dfdoctor-host-facts", daemon=True)
    side.start()
    stage("torch build")
    build = _torch_build.read()
    if _torch_build.cpu_only(build):
        publish(torch=dict(file=build["file"], version=build["version"], cuda=None, hip=None, arch_list=[]),
                available=False, device_count=0, init_ok=False,
                build_note="torch %s is built without CUDA (torch/version.py)" % build["version"])
        side.join(10)
        stage("done")
        return 0
    stage("import torch")
    try:
        import torch
    except ModuleNotFoundError as exc:
        publish(torch=None, import_error=error_text(exc), missing_module=exc.name)
        side.join(10)
        stage("done")
        return 0
    except BaseException as exc:
        publish(torch=None, import_error=error_text(exc), import_traceback=traceback.format_exc()[-3000:])
        side.join(10)
        stage("done")
        return 0
    publish(torch=torch_facts(torch))
    stage("cuda available")
    try:
        publish(available=bool(torch.cuda.is_available()), device_count=int(torch.cuda.device_count()))
    except Exception as exc:
        publish(available=False, device_count=0, available_error=error_text(exc))
    stage("cuda init")
    try:
        torch.cuda.init()
        publish(init_ok=True)
    except Exception as exc:
        # torch.cuda.init() states the reason is_available() only hints at ("no NVIDIA driver", error 802...)
        publish(init_ok=False, init_error=error_text(exc))
    if STATE.get("init_ok"):
        devices = []
        for i in range(STATE.get("device_count") or 0):
            devices.append(probe_device(torch, i))
            publish(devices=devices)
    stage("host facts")
    side.join(10)
    stage("done")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the answer is written: skip tearing down torch and the CUDA context (about 0.3 s)
