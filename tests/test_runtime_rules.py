"""The run-time readers on the words torch and CUDA print (texts as the H200 batch of bench/gpu_runtime.sh
printed them; the jobs themselves need a GPU, so bench/results/gpu_runtime_h200/ holds their real verdicts)."""

from __future__ import annotations

from dfdoctor.diagnose import rules_runtime
from dfdoctor.diagnose.traceback import parse_python_error

OOM = """step 4 loss 0.0124
Traceback (most recent call last):
  File "/work/bench/gpu_jobs/cuda_oom.py", line 9, in <module>
    activations = torch.empty(int(free * 1.5) // 4, dtype=torch.float32, device="cuda")
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 172.50 GiB. GPU 0 has a total capacity of 139.81 GiB \
of which 114.96 GiB is free. Process 4242 has 24.28 GiB memory in use. Including non-PyTorch memory, this process \
has 582.00 MiB memory in use. Of the allocated memory 64.00 MiB is allocated by PyTorch, and 2.00 MiB is reserved by \
PyTorch but unallocated. If reserved but unallocated memory is large try setting \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  \
(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""

ASSERT = """/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1553: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] \
Assertion `srcIndex < srcSelectDimSize` failed.
Traceback (most recent call last):
  File "/work/bench/gpu_jobs/cuda_assert.py", line 8, in <module>
    print(out.item(), flush=True)
torch.AcceleratorError: CUDA error: device-side assert triggered
Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more \
information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""

ARCH = """/x/torch/cuda/__init__.py:283: UserWarning:
NVIDIA H200 with CUDA capability sm_90 is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75.
Traceback (most recent call last):
  File "/w/train.py", line 3, in <module>
    torch.ones(1, device="cuda") + 1
RuntimeError: CUDA error: no kernel image is available for execution on the device
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""

ORDINAL = """[rank1]: Traceback (most recent call last):
Traceback (most recent call last):
  File "/w/ddp.py", line 11, in main
    torch.cuda.set_device(local_rank)
torch.AcceleratorError: CUDA error: invalid device ordinal
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""


def _read(text, argv=(), env=None, local=False):
    err = parse_python_error(text)
    assert err is not None
    return rules_runtime.classify(err, rules_runtime.Context(text, list(argv), env or {}, local))


def test_cuda_oom_names_ask_free_total_and_the_other_process():
    f = _read(OOM)
    assert f.cause == "cuda-oom"
    assert "172.50 GiB" in f.summary and "114.96 GiB free of 139.81 GiB" in f.summary
    assert any("pid 4242 also held 24.28 GiB" in e for e in f.evidence)
    assert "stop them (pid 4242)" in f.fix and "smaller batch size" in f.fix
    assert "dfdoctor check" not in f.fix


def test_device_side_assert_quotes_the_assert():
    f = _read(ASSERT)
    assert f.cause == "cuda-error" and "device-side assert" in f.summary
    assert "cuda_assert.py, line 8" in f.summary
    assert any("srcIndex < srcSelectDimSize" in e for e in f.evidence)
    assert "CUDA_LAUNCH_BLOCKING=1" in f.fix


def test_no_kernel_image_names_the_sm_and_the_arch_list():
    f = _read(ARCH)
    assert f.cause == "cuda-error"
    assert "sm_90" in f.fix and "sm_50 sm_60 sm_70 sm_75" in f.fix and "9.0" in f.fix
    assert "GPU: NVIDIA H200, sm_90" in f.evidence


def test_invalid_device_ordinal_compares_ranks_and_gpus():
    f = _read(ORDINAL, argv=["torchrun", "--nproc_per_node", "2", "ddp.py"], env={"CUDA_VISIBLE_DEVICES": "0"})
    assert f.cause == "cuda-error" and "invalid device ordinal" in f.summary
    assert "ranks per node asked for: 2" in f.evidence and "CUDA_VISIBLE_DEVICES='0'" in f.evidence
    assert "LOCAL_RANK" in f.fix


def test_an_ordinary_error_is_not_read_as_a_runtime_cause():
    text = 'Traceback (most recent call last):\n  File "/w/t.py", line 1, in <module>\n' \
           "    x = cfg['lr']\nKeyError: 'lr'\n"
    assert _read(text) is None


def test_no_fix_promises_that_check_reproduces_a_runtime_failure():
    import inspect

    from dfdoctor.diagnose import verdict

    for mod in (rules_runtime, verdict):
        assert "reproduces it" not in inspect.getsource(mod)


def test_real_h200_torchrun_output_names_rank_1_and_its_own_error():
    """The output of `torchrun --nproc_per_node 2 ddp.py` on one H200 (bench/results/gpu_runtime_h200/)."""
    from pathlib import Path

    from dfdoctor.diagnose import elastic

    text = (Path(__file__).parent.parent / "bench/results/gpu_runtime_h200/gpu_torchrun_2_on_1_job.log").read_text()
    row = elastic.root_cause(text)
    assert row.rank == 1 and row.exitcode == 1 and row.error_file is None
    err, source = elastic.rank_error(text, row)
    assert err.exc_type == "torch.AcceleratorError" and "invalid device ordinal" in err.message
    assert "without a rank prefix" in source and err.user_where.endswith("ddp.py, line 11")
    f = rules_runtime.classify(err, rules_runtime.Context(text, ["torchrun", "--nproc_per_node", "2", "ddp.py"]))
    assert f.cause == "cuda-error" and "ranks per node asked for: 2" in f.evidence
