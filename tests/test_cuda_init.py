"""cuda.init on this CPU machine, for real: the CPU-only torch build, CUDA_VISIBLE_DEVICES, a CUDA init that
hangs (a fake torch, the only part not real), a missing torch and a missing interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor.checks.cuda_init import cuda_init
from dfdoctor import causes
from dfdoctor.context import Context
from dfdoctor.model import Status
from dfdoctor.runner import run_checks

from support.torch_imports import cpu_only_torch, marking, unreadable_build

ROOT = Path(__file__).resolve().parent.parent
FAKE_TORCH = ROOT / "tests" / "fakes" / "fake_torch"
PYTHON = sys.executable  # the venv's interpreter: it has the CPU build of torch


def run(ctx: Context):
    """Run the check function in this process (its probe is still a real subprocess)."""
    return list(cuda_init.func(ctx))


def env(**extra: str) -> dict[str, str]:
    """This environment, minus anything that would let a real GPU in, plus `extra`."""
    e = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH")}
    e.update(extra)
    return e


def test_cpu_only_torch_is_a_skip_that_says_why():
    (r,) = run(Context(python=PYTHON, env=env(), timeout=60))
    assert r.status is Status.SKIP
    assert "CPU-only build" in r.summary and "torch.version.cuda is None" in r.summary
    assert r.data["cuda"]["torch"].endswith("+cpu")


def test_cpu_only_torch_fails_when_a_gpu_is_required():
    (r,) = run(Context(python=PYTHON, env=env(), timeout=60, require_gpu=True))
    assert r.status is Status.FAIL and r.cause == causes.CUDA_UNAVAILABLE
    assert "CPU-only" in r.summary and "download.pytorch.org/whl/cu" in r.fix
    assert any("--require-gpu" in e for e in r.evidence)
    if any(e.startswith("no NVIDIA driver") for e in r.evidence):  # this machine: no GPU for a CUDA torch to find
        assert r.fix.startswith("run on a machine with a GPU: this one has no NVIDIA driver"), r.fix


def test_a_cpu_only_torch_is_judged_from_its_version_file_without_importing_it(tmp_path: Path):
    """Round 19: a build whose torch/version.py says no CUDA and no HIP is answered without `import torch` (about a
    CPU-second), with the verdicts the import gave: the same torch imported through a folder without its version.py
    (so its build cannot be read) is still imported, and judged alike in every word but the build's line."""
    build = cpu_only_torch()
    extra, marks = marking(tmp_path)
    imported = {"PYTHONPATH": f"{unreadable_build(tmp_path)}:{extra['PYTHONPATH']}"}
    verdicts = {}
    for how, more in (("read", {}), ("imported", imported)):
        for need in (False, True):
            (r,) = run(Context(python=PYTHON, env=env(**{**extra, **more}), timeout=120, require_gpu=need))
            verdicts[how, need] = r
        assert bool(os.listdir(marks)) is (how == "imported"), (how, os.listdir(marks))
    for need in (False, True):
        read, imp = verdicts["read", need], verdicts["imported", need]
        assert (read.status, read.cause, read.summary, read.fix) == (imp.status, imp.cause, imp.summary, imp.fix)
        assert read.status is (Status.FAIL if need else Status.SKIP)
        said = f"torch {build['version']} is built without CUDA (torch/version.py)"
        assert [e for e in read.evidence if e != said] == [e for e in imp.evidence if not e.startswith("torch says:")]
        assert said in read.evidence and any(e.startswith("torch says: AssertionError") for e in imp.evidence)
        facts = [{k: v for k, v in r.data["cuda"].items() if k not in ("stages", "probe_s")} for r in (read, imp)]
        assert facts[0] == facts[1] and facts[0]["torch"] == build["version"]


def test_command_naming_cuda_warns_and_says_so():
    # no GPU is observed; that the job needs one is read from its command line: a warning, not a failure
    ctx = Context(python=PYTHON, env=env(), timeout=60, command=[PYTHON, "train.py", "--device", "cuda"])
    (r,) = run(ctx)
    assert r.status is Status.WARN and r.basis == "static" and r.cause == causes.CUDA_UNAVAILABLE
    assert any("the command names cuda" in e for e in r.evidence)
    (r,) = run(Context(python=PYTHON, env=env(), timeout=60, command=ctx.command, require_gpu=True))
    assert r.status is Status.FAIL and r.basis == "observed"


def test_empty_cuda_visible_devices_is_reported():
    (r,) = run(Context(python=PYTHON, env=env(CUDA_VISIBLE_DEVICES=""), timeout=60, require_gpu=True))
    assert r.status is Status.FAIL and r.cause == causes.CUDA_UNAVAILABLE
    assert any("CUDA_VISIBLE_DEVICES='' is set but empty, which hides every GPU" in e for e in r.evidence)
    assert r.data["cuda"]["env"]["CUDA_VISIBLE_DEVICES"] == ""


def test_multicast_guards_reach_the_probe(tmp_path: Path):
    """The probe must run with NVLink multicast off, whatever the job's environment says."""
    seen = tmp_path / "env.txt"
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nenv > {seen}\nexec {PYTHON} \"$@\"\n")
    wrapper.chmod(0o755)
    run(Context(python=str(wrapper), env=env(NCCL_NVLS_ENABLE="1"), timeout=60))
    text = seen.read_text()
    assert "NCCL_NVLS_ENABLE=0" in text and "TORCH_SYMM_MEM_DISABLE_MULTICAST=1" in text
    assert "NVSHMEM_DISABLE_NVLS=1" in text


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_hanging_cuda_init_is_named_with_its_stack_and_leaves_nothing(tmp_path: Path):
    pidfile = tmp_path / "child.pid"
    ctx = Context(python=PYTHON, timeout=3,
                  env=env(PYTHONPATH=str(FAKE_TORCH), FAKE_TORCH_MODE="hang", FAKE_TORCH_CHILD_PIDFILE=str(pidfile)))
    t = time.monotonic()
    (r,) = run(ctx)
    elapsed = time.monotonic() - t
    assert r.status is Status.FAIL and r.cause == causes.CUDA_INIT_HANG
    assert "did not finish within 3 s" in r.summary and "'cuda init'" in r.summary
    assert elapsed < 3 + 1.5, elapsed
    assert any("in _init" in e for e in r.evidence), r.evidence  # the stack, down to the stuck frame
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the process the hung CUDA init started is still running"


def test_hang_through_the_runner_is_the_check_finding_not_a_runner_timeout(tmp_path: Path):
    ctx = Context(python=PYTHON, timeout=3,
                  env=env(PYTHONPATH=str(FAKE_TORCH), FAKE_TORCH_MODE="hang",
                          FAKE_TORCH_CHILD_PIDFILE=str(tmp_path / "pid")))
    (rec,) = run_checks([cuda_init], ctx, "pre")
    assert rec.status is Status.FAIL and rec.cause == causes.CUDA_INIT_HANG
    assert rec.duration_s < 3 + 1.5
    assert _gone(int((tmp_path / "pid").read_text()))


def test_cuda_error_at_init_is_init_failed_with_the_error_and_a_fix():
    ctx = Context(python=PYTHON, timeout=30, env=env(PYTHONPATH=str(FAKE_TORCH), FAKE_TORCH_MODE="init-error"))
    (r,) = run(ctx)
    assert r.status is Status.FAIL and r.cause == causes.CUDA_INIT_FAILED
    assert "system not yet initialized (error 802)" in r.summary
    assert "nvidia-fabricmanager" in r.fix


def test_interpreter_without_torch(tmp_path: Path):
    nosite = tmp_path / "python-nosite"
    nosite.write_text(f"#!/bin/sh\nexec {PYTHON} -S \"$@\"\n")  # -S: no site-packages, so no torch
    nosite.chmod(0o755)
    (r,) = run(Context(python=str(nosite), env=env(), timeout=30))
    assert r.status is Status.SKIP and "torch is not installed" in r.summary
    (r,) = run(Context(python=str(nosite), env=env(), timeout=30, require_gpu=True))
    assert r.status is Status.FAIL and r.cause == causes.CUDA_UNAVAILABLE and "pip install torch" in r.fix


def test_missing_interpreter_is_said_plainly():
    (r,) = run(Context(python="/nonexistent/bin/python3", env=env(), timeout=10, require_gpu=True))
    assert r.status is Status.FAIL and r.cause == causes.COMMAND_NOT_FOUND
    assert "/nonexistent/bin/python3 could not be started" in r.summary


def test_no_probe_outlives_the_check(tmp_path: Path):
    mark = str(tmp_path / "pid")  # in the environment of every process this run starts, and no other's
    run(Context(python=PYTHON, timeout=3, env=env(PYTHONPATH=str(FAKE_TORCH), FAKE_TORCH_MODE="hang",
                                                  FAKE_TORCH_CHILD_PIDFILE=mark)))
    time.sleep(0.2)
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get("FAKE_TORCH_CHILD_PIDFILE") == mark:
                left.append(" ".join(p.info["cmdline"] or []))
        except psutil.Error:
            continue
    assert not left


@pytest.mark.parametrize("version_py, read", [
    ("from typing import Optional\n__version__ = '2.5.0+cpu'\ncuda: Optional[str] = None\nhip = None\n",
     {"version": "2.5.0+cpu", "cuda": None, "hip": None}),
    ("__version__ = '2.5.0+cu124'\ncuda = '12.4'\nhip = None\n", {"version": "2.5.0+cu124", "cuda": "12.4", "hip": None}),
    ("import os\n__version__ = '2.5.0'\ncuda = os.environ.get('X')\nhip = None\n", None),  # computed: unknown
    ("__version__ = '2.5.0'\ncuda = None\nhip = None\ncuda = '12.4'\n", None),  # set twice
    ("__version__ = '2.5.0'\ncuda = None\nif True:\n    cuda = '12.4'\nhip = None\n", None),
    ("__version__ = '2.5.0'\ncuda = None\n", None),  # no word on HIP
    ("__version__ = '2.5.0'\ncuda = None\nhip = None\ndef (\n", None),  # does not parse
    (None, None),  # no version.py beside torch's __init__.py
])
def test_the_torch_build_is_read_from_version_py_or_not_at_all(tmp_path: Path, version_py, read):
    """What cuda.init's probe and the probe server read of a torch build without importing it: only plain literal
    assignments of all three names; anything else is unknown (then torch is imported, as before round 19)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('never imported here')\n")
    if version_py is not None:
        (tmp_path / "torch" / "version.py").write_text(version_py)
    probes = ROOT / "checks" / "probes"
    code = f"import json, sys\nsys.path.insert(0, {str(probes)!r})\nimport _torch_build\nb = _torch_build.read()\n" \
           "print(json.dumps([b and {k: b[k] for k in ('version', 'cuda', 'hip')}, _torch_build.cpu_only(b)]))\n"
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         env=env(PYTHONPATH=str(tmp_path)))
    assert json.loads(out.stdout) == [read, read is not None and read["cuda"] is None]
