"""The facts of `dfdoctor env`, gathered in the training interpreter: its Python, then torch's view of CUDA
(imported here, never in dfdoctor's own process), then the NVIDIA driver as nvidia-smi reports it.

Standard library and torch only; each part that fails says why instead of ending the probe.
"""

import os
import platform
import subprocess
import sys

from _probe_support import answer, install_stack_dump, request

install_stack_dump()


def distribution():
    """/etc/os-release's PRETTY_NAME ("Debian GNU/Linux 12 (bookworm)"), as torch's collect_env says it."""
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("PRETTY_NAME="):
                        return line.split("=", 1)[1].strip().strip('"\'')
        except OSError:
            continue
    return None


def cpu():
    """The CPU's model name and how many logical CPUs there are (`Intel(R) Xeon(R) ... (16 CPUs)`)."""
    name = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "cpu model")) and ":" in line:
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    return "%s (%s CPUs)" % (name, os.cpu_count() or "?")


def versions(names):
    """{name: installed version, or None} for each distribution name, from importlib.metadata."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return {n: "unknown (Python %d.%d has no importlib.metadata)" % sys.version_info[:2] for n in names}
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except Exception:
            out[n] = None
    return out


try:
    wanted = request()
except (KeyError, OSError, ValueError):
    wanted = {}
facts = {"executable": sys.executable, "realpath": os.path.realpath(sys.executable),
         "python": sys.version.replace("\n", " "), "platform": platform.platform(),
         "distribution": distribution(), "cpu": cpu(),
         "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
facts["libraries"] = versions(wanted.get("requirements") or [])
# like collect_env's list: shown when installed, whatever the requirements say
facts["libraries_seen"] = {n: v for n, v in versions(wanted.get("usual") or []).items() if v}
facts["torch_error"] = "the torch import did not finish"
answer(facts)  # what is known if the import hangs


def torch_facts(facts):
    """torch's version and its view of CUDA, into `facts`; an import that fails says why."""
    try:
        import torch
    except Exception as exc:
        facts["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
        return
    facts.pop("torch_error", None)
    facts["torch"] = torch.__version__
    facts["torch_file"] = getattr(torch, "__file__", None)
    facts["torch_cuda"] = getattr(torch.version, "cuda", None)
    facts["torch_hip"] = getattr(torch.version, "hip", None)
    try:
        facts["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception as exc:  # a broken cuDNN is a fact too
        facts["cudnn"] = "error: %s: %s" % (type(exc).__name__, exc)
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        facts["gpus"] = ["%s (compute capability %d.%d)" % ((torch.cuda.get_device_name(i),)
                                                            + torch.cuda.get_device_capability(i))
                         for i in range(torch.cuda.device_count())] if facts["cuda_available"] else []
    except Exception as exc:
        facts["cuda_error"] = "%s: %s" % (type(exc).__name__, exc)


torch_facts(facts)
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=20)
    facts["driver"] = smi.stdout.strip() if smi.returncode == 0 else \
        "nvidia-smi failed: " + (smi.stderr.strip() or smi.stdout.strip() or "exit %d" % smi.returncode)[:300]
except FileNotFoundError:
    facts["driver"] = "no nvidia-smi on PATH"
except (OSError, subprocess.SubprocessError) as exc:
    facts["driver"] = "nvidia-smi: %s" % exc
answer(facts)
