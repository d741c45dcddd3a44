"""The facts of `dfdoctor env`, gathered in the training interpreter: its Python, then torch's view of CUDA
(imported here, never in dfdoctor's own process), then the NVIDIA driver as nvidia-smi reports it.

Standard library and torch only; each part that fails says why instead of ending the probe.
"""

import os
import platform
import subprocess
import sys

from _probe_support import answer, install_stack_dump

install_stack_dump()
facts = {"executable": sys.executable, "realpath": os.path.realpath(sys.executable),
         "python": sys.version.replace("\n", " "), "platform": platform.platform(),
         "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
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
