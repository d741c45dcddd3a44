"""cuda.init's judgement on facts a GPU machine reports, without a GPU: each case starts from the payload the
probe wrote on the real H200 (device run 1, bench/results/cuda_h200_ok.json) and changes one thing."""

from __future__ import annotations

import copy

import pytest

from dfdoctor.checks.cuda_common import Expectation
from dfdoctor.checks.cuda_init import judge
from dfdoctor import causes
from dfdoctor.context import Context
from dfdoctor.model import Status
from dfdoctor.probe import ProbeOutcome

H200 = {
    "stage": "done", "pid": 4242, "python": "/opt/torch/.venv/bin/python3",
    "env": {"CUDA_VISIBLE_DEVICES": None, "NVIDIA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": None,
            "PYTORCH_NVML_BASED_CUDA_CHECK": None},
    "dev_nodes": ["nvidia-caps", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"],
    "proc_driver": {"kernel_module": "580.159.04",
                    "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-cbd0dcec-f6da-c4cb-11d0-ddaf00afce45"}]},
    "libcuda": {"loadable": True, "driver_cuda": "13.0"},
    "physical": {"source": "nvml", "driver": "580.159.04",
                 "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-cbd0dcec-f6da-c4cb-11d0-ddaf00afce45",
                           "total_mib": 143771, "used_mib": 615, "processes": []}]},
    "torch": {"version": "2.11.0+cu130", "cuda": "13.0", "hip": None,
              "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]},
    "available": True, "device_count": 1, "init_ok": True,
    "devices": [{"index": 0, "name": "NVIDIA H200", "capability": "9.0", "sm": "sm_90", "total_mib": 143155,
                 "multiprocessors": 132, "free_mib": 142629, "context_s": 0.132, "matmul_ok": True,
                 "matmul_s": 0.261, "bf16": True, "reserved_mib": 54}],
}
NO_GPU = Expectation(None, "nothing in the launch asks for a GPU")
REQUIRED = Expectation("required", "--require-gpu was given")
HINTED = Expectation("hinted", "the command runs torchrun ('torchrun')")


def facts(**changes) -> dict:
    """The H200 payload with some top-level keys replaced."""
    f = copy.deepcopy(H200)
    f.update(changes)
    return f


def verdict(payload: dict, exp: Expectation = REQUIRED, **outcome):
    """Judge a payload as if the probe had written it; returns the list of results."""
    out = ProbeOutcome(argv=["python3", "cuda_init_probe.py"], returncode=outcome.pop("returncode", 0),
                       stdout="", stderr=outcome.pop("stderr", ""), duration_s=5.0, payload=payload, **outcome)
    return list(judge(Context(python="python3", env={}), exp, out, 60.0))


def test_healthy_h200_is_ok_with_the_device_facts():
    (r,) = verdict(facts())
    assert r.status is Status.OK
    assert r.summary.startswith("1 GPU usable: 0 NVIDIA H200 (sm_90, bf16, 139.3/139.8 GiB free)")
    assert "torch 2.11.0+cu130 (CUDA 13.0), driver 580.159.04 (CUDA 13.0)" in r.summary
    assert r.data["cuda"]["devices"][0]["multiprocessors"] == 132


def test_memory_held_by_another_process_warns_and_names_it():
    f = facts()
    f["devices"][0]["free_mib"] = 40_000
    f["physical"]["gpus"][0]["processes"] = [{"pid": 999, "used_mib": 100_000}]
    rs = verdict(f)
    assert [r.status for r in rs] == [Status.WARN, Status.OK]
    assert "pid 999 (100000 MiB)" in rs[0].summary and "CUDA_VISIBLE_DEVICES" in rs[0].fix


def test_gpu_newer_than_the_torch_build_fails_with_the_arch_list():
    f = facts()
    f["devices"][0].update(sm="sm_120", capability="12.0", name="NVIDIA RTX PRO 6000")
    f["torch"]["arch_list"] = ["sm_50", "sm_60", "sm_70", "sm_80", "sm_90"]
    (r,) = verdict(f)
    assert r.status is Status.FAIL and r.cause == causes.CUDA_INIT_FAILED
    assert "sm_120" in r.summary and "sm_50 sm_60" in r.summary and "not at all" in r.summary


def test_gpu_reached_only_through_ptx_jit_warns():
    f = facts()
    f["devices"][0].update(sm="sm_120", capability="12.0")
    f["torch"]["arch_list"] = ["sm_80", "sm_90", "compute_90"]
    rs = verdict(f)
    assert [r.status for r in rs] == [Status.WARN, Status.OK]
    assert "only through JIT from compute_90 PTX" in rs[0].summary


def test_failing_matmul_names_the_gpu_and_the_stage():
    f = facts()
    f["devices"][0].update(error="RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED", failed_stage="device 0: matmul")
    f["devices"][0].pop("matmul_ok")
    (r,) = verdict(f)
    assert r.status is Status.FAIL and r.cause == causes.CUDA_INIT_FAILED
    assert "GPU 0 (NVIDIA H200) failed in 'device 0: matmul'" in r.summary and "CUBLAS" in r.summary


def test_driver_too_old_for_the_runtime_is_the_summary():
    f = facts(libcuda={"loadable": True, "driver_cuda": "12.2"}, init_ok=False,
              init_error="RuntimeError: The NVIDIA driver on your system is too old (found version 12020).")
    (r,) = verdict(f)
    assert r.status is Status.FAIL and r.cause == causes.CUDA_INIT_FAILED
    assert "supports CUDA 12.2, but torch was built for CUDA 13.0" in r.summary
    assert "upgrade the NVIDIA driver" in r.fix


def test_missing_device_nodes_in_a_container_point_at_the_lxc_config():
    f = facts(dev_nodes=[], available=False, device_count=0, init_ok=False,
              init_error="RuntimeError: No CUDA GPUs are available")
    (r,) = verdict(f)
    assert r.status is Status.FAIL and r.cause == causes.CUDA_UNAVAILABLE
    assert "device nodes are missing" in r.summary and "/dev/nvidiactl" in r.summary
    assert "lxc.cgroup2.devices.allow" in r.fix


def test_container_without_libcuda():
    f = facts(libcuda={"loadable": False, "error": "libcuda.so.1: cannot open shared object file"},
              available=False, device_count=0, init_ok=False)
    (r,) = verdict(f)
    assert r.cause == causes.CUDA_UNAVAILABLE and "libcuda.so.1" in r.summary and "--no-kernel-module" in r.fix


def test_nvidia_visible_devices_void():
    f = facts(dev_nodes=["nvidiactl", "nvidia0"], available=False, device_count=0, init_ok=False)
    f["env"]["NVIDIA_VISIBLE_DEVICES"] = "void"
    (r,) = verdict(f)
    assert "NVIDIA_VISIBLE_DEVICES='void'" in r.summary


@pytest.mark.parametrize("value, words", [
    ("7", "'7' names a GPU that does not exist (this machine has 1 GPU: 0 (GPU-cbd0dcec"),
    ("GPU-00000000-bad", "'GPU-00000000-bad' matches no GPU's UUID"),
    ("0,0", "names GPU 0 twice"),
])
def test_cuda_visible_devices_mistakes(value, words):
    f = facts(available=False, device_count=0, init_ok=False, init_error="RuntimeError: No CUDA GPUs are available")
    f["env"]["CUDA_VISIBLE_DEVICES"] = value
    (r,) = verdict(f)
    assert r.status is Status.FAIL and r.cause == causes.CUDA_UNAVAILABLE and words in r.summary
    assert "CUDA_VISIBLE_DEVICES=0" in r.fix
    assert "torch says: RuntimeError: No CUDA GPUs are available" in r.evidence


@pytest.mark.parametrize("exp, status", [(NO_GPU, Status.SKIP), (HINTED, Status.WARN), (REQUIRED, Status.FAIL)])
def test_how_loud_no_gpu_is_depends_on_what_the_launch_expects(exp, status):
    f = facts(available=False, device_count=0, init_ok=False)
    f["env"]["CUDA_VISIBLE_DEVICES"] = ""
    (r,) = verdict(f, exp)
    assert r.status is status
    assert "hides every GPU" in r.summary


def test_probe_killed_while_importing_torch_is_an_import_hang():
    (r,) = verdict({"stage": "import torch"}, timed_out=True, returncode=-9,
                   stderr='Current thread 0x1 (most recent call first):\n  File "/nfs/torch/__init__.py", line 9 in <module>\n')
    assert r.status is Status.FAIL and r.cause == causes.IMPORT_HANG
    assert any("/nfs/torch/__init__.py" in e for e in r.evidence)


def test_probe_killed_on_a_device_is_a_cuda_init_hang_naming_the_stage():
    (r,) = verdict({"stage": "device 3: synchronize"}, timed_out=True, returncode=-9)
    assert r.cause == causes.CUDA_INIT_HANG and "'device 3: synchronize'" in r.summary


def test_probe_crashing_inside_the_driver():
    (r,) = verdict({"stage": "device 0: context"}, returncode=-11, stderr="Fatal Python error: Segmentation fault\n")
    assert r.status is Status.FAIL and r.cause == causes.CUDA_INIT_FAILED
    assert "SIGSEGV" in r.summary and "device 0: context" in r.summary
