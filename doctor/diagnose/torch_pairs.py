"""torch, torchvision and torchaudio are released as sets, built per CUDA version (or for the CPU) and served from
torch's own index: a torchvision of another release, or of another build, fails at import (`operator
torchvision::nms does not exist`). This module names the set that belongs to an installed torch, and the one pip
line that installs it without replacing that torch.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from typing import Optional

INDEX = "https://download.pytorch.org/whl"
_VERSIONS = ("import json, importlib.metadata as m\n"
             "out = {}\n"
             "for d in ('torch', 'torchvision', 'torchaudio'):\n"
             "    try: out[d] = m.version(d)\n"
             "    except Exception: pass\n"
             "print(json.dumps(out))")


def paired(torch_version: str, package: str) -> Optional[str]:
    """The `package` release built with `torch_version` (no local tag), or None when unknown.

    torch 2.N.P goes with torchvision 0.(N+15).P and torchaudio 2.N.P (torch 2.0.P: torchvision 0.15.(P+1),
    torchaudio 2.0.(P+1)); torch 1.N.P with torchvision 0.(N+1).P."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", torch_version)
    if not m:
        return None
    major, minor, patch = (int(x) for x in m.groups())
    if package == "torchvision":
        if major == 2:
            return f"0.{minor + 15}.{patch + 1 if minor == 0 else patch}"
        if major == 1 and minor >= 5:
            return f"0.{minor + 1}.{patch}"
        return None
    if package == "torchaudio":
        if major == 2:
            return f"2.{minor}.{patch + 1 if minor == 0 else patch}"
        if major == 1 and minor >= 5:
            return f"0.{minor}.{patch}"
        return None
    return None


def build(torch_version: str) -> Optional[str]:
    """The build tag of a torch version: 'cpu', 'cu121', 'rocm6.1', or None (a PyPI wheel without a tag)."""
    return torch_version.split("+", 1)[1] if "+" in torch_version else None


def install_line(torch_version: str, packages: list[str], python: str = "python3") -> str:
    """The pip line that installs `packages` paired with the installed torch, from the same index, keeping
    that torch (it is named, pinned, so pip has nothing to upgrade)."""
    tag = build(torch_version)
    suffix = f"+{tag}" if tag else ""
    pins = [f"torch=={torch_version}"]
    for p in packages:
        v = paired(torch_version, p)
        pins.append(f"{p}=={v}{suffix}" if v else p)
    index = f" --index-url {INDEX}/{tag}" if tag else ""
    return f"{shlex.quote(python)} -m pip install " + " ".join(pins) + index


def installed(python: str, timeout: float = 15.0) -> dict[str, str]:
    """The versions of torch, torchvision and torchaudio installed in `python` (read from their metadata, never
    imported: importing the broken one is what failed)."""
    try:
        out = subprocess.run([python, "-c", _VERSIONS], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    try:
        found = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else {}
    except ValueError:
        return {}
    return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def missing_fix(package: str, python: str) -> Optional[str]:
    """For a missing torchvision/torchaudio beside an installed torch: the pinned pair from torch's index (a bare
    `pip install torchvision` replaces that torch with the newest release); None for other packages."""
    if package not in ("torchvision", "torchaudio"):
        return None
    torch_v = installed(python).get("torch")
    if not torch_v or not paired(torch_v, package):
        return None
    return install_line(torch_v, [package], python) + "   (paired with the installed torch; dfdoctor did not run it)"
