"""DataLoader workers in a container with a too-small /dev/shm (`docker run --shm-size`), launched for real
with `dfdoctor launch --target docker://...`: the verdict is `shm-exhausted` with the shm fix. The container
borrows this machine's /usr (Python 3.11) and torch's site-packages, read-only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from infra.fixtures import Infra, docker_infra, infra, kill_naming  # noqa: F401
from jobs.harness import JOBS
from support.torch_site import torch_site

pytestmark = pytest.mark.slow
SITE = str(torch_site())  # found, not imported; skips the file without torch (support/torch_site.py)


@pytest.fixture
def small_shm(docker_infra: Infra, tmp_path: Path):
    """A container of its own with a 1 MiB /dev/shm and this machine's torch, removed afterwards."""
    name = f"dfd-shm-{uuid.uuid4().hex[:8]}"
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chmod(ws, 0o1777)
    shutil.copy(JOBS / "shm_loader.py", ws / "train.py")
    run = subprocess.run(["docker", "run", "-d", "--name", name, "--network", "none", "--shm-size", "1m",
                          "-v", "/usr:/usr:ro", "-v", f"{SITE}:/site:ro", "-v", f"{ws}:/workspace",
                          "dfdoctor-test:base", "sleep", "infinity"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    yield name, ws
    kill_naming(name)
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)


def test_dataloader_workers_out_of_shared_memory(small_shm, dfdoctor, tmp_path):
    name, ws = small_shm
    p = dfdoctor("launch", "--target", f"docker://{name}", "--no-check", "--cwd", "/workspace", "--log",
                 "/workspace/train.log", "--watch", "90", "--format", "json", "--", "env", "PYTHONPATH=/site",
                 "python3", "train.py", cwd=tmp_path, timeout=180)
    rep = json.loads(p.stdout)
    v = rep["verdict"]
    assert v["cause"] == "shm-exhausted", v
    assert "--shm-size" in v["fix"] and "num_workers" in v["fix"]
    assert any("shared memory" in e for e in v["evidence"]), v["evidence"]
