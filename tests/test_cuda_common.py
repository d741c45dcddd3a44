"""The GPU checks' pure logic: CUDA_VISIBLE_DEVICES as CUDA reads it, whether a launch expects a GPU, stacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dfdoctor.checks.cuda_common import SAFE_GPU_ENV, expectation, parse_visible, probe_env, stack_excerpt
from dfdoctor.context import Context

# The H200 the device run saw, plus a second GPU for ordering cases.
ONE = [{"index": 0, "uuid": "GPU-cbd0dcec-f6da-c4cb-11d0-ddaf00afce45"}]
TWO = ONE + [{"index": 1, "uuid": "GPU-77aa0000-1111-2222-3333-444455556666"}]


def test_unset_variable_shows_every_gpu():
    v = parse_visible(None, TWO)
    assert v.visible == (0, 1) and not v.hidden and not v.problems and not v.hides_all


def test_empty_variable_hides_every_gpu():
    v = parse_visible("", TWO)
    assert v.hides_all and v.hidden == (0, 1)
    assert "empty" in v.problems[0] and "hides every GPU" in v.problems[0]


def test_index_that_does_not_exist_is_named_with_the_gpus_that_do():
    v = parse_visible("7", ONE)
    assert v.hides_all and v.visible == ()
    assert "'7' names a GPU that does not exist" in v.problems[0]
    assert "this machine has 1 GPU: 0 (GPU-cbd0dcec" in v.problems[0]


def test_uuid_that_matches_nothing():
    v = parse_visible("GPU-00000000-bad", ONE)
    assert v.hides_all and "matches no GPU's UUID" in v.problems[0]


def test_uuid_prefix_selects_that_gpu():
    v = parse_visible("GPU-77aa", TWO)
    assert v.visible == (1,) and v.hidden == (0,) and not v.problems


def test_repeated_index_leaves_torch_no_gpu():
    v = parse_visible("0,0", TWO)
    assert v.hides_all and v.visible == ()
    assert "names GPU 0 twice" in v.problems[0]


def test_cuda_stops_at_the_first_bad_entry():
    v = parse_visible("1,7,0", TWO)
    assert v.visible == (1,) and v.hidden == (0,)
    assert "every entry after it" in v.problems[0]


def test_order_is_kept_and_negative_index_ends_the_list():
    assert parse_visible("1,0", TWO).visible == (1, 0)
    v = parse_visible("-1", TWO)
    assert v.hides_all and "negative" in v.problems[0]
    assert parse_visible("1,-1,0", TWO).visible == (1,)


def test_mig_entries_are_assumed_visible():
    v = parse_visible("MIG-4b7e2d6f-aaaa", ONE)
    assert not v.hides_all and not v.problems


def test_without_a_gpu_list_only_the_value_is_judged():
    assert parse_visible("3", []).visible == (3,)
    assert parse_visible("", []).hides_all


def test_probe_env_keeps_multicast_off_even_against_the_job_env():
    ctx = Context(env={"NCCL_NVLS_ENABLE": "1", "PATH": "/bin"})
    env = probe_env(ctx, {"RANK": "3"})
    assert all(env[k] == v for k, v in SAFE_GPU_ENV.items())
    assert env["RANK"] == "3" and env["PATH"] == "/bin"
    assert ctx.env["NCCL_NVLS_ENABLE"] == "1"  # the context itself is not changed


def test_probe_env_applies_what_the_command_line_sets(tmp_path):
    ctx = Context(command=["env", "CUDA_VISIBLE_DEVICES=7", "python3", "train.py"], cwd=tmp_path, env={"PATH": "/bin"})
    assert probe_env(ctx)["CUDA_VISIBLE_DEVICES"] == "7"


@pytest.mark.parametrize("command, level", [
    (["python", "train.py", "--device", "cuda"], "expected"),
    (["python", "train.py", "--device=cuda:1"], "expected"),
    (["torchrun", "--nproc_per_node=gpu", "train.py"], "expected"),
    (["python", "train.py", "--backend", "nccl"], "expected"),
    (["torchrun", "--nproc_per_node", "4", "train.py"], "hinted"),
    (["python", "train.py", "--lr", "3e-4"], None),
    (["python", "train.py", "--precuda_thing"], None),
    # a switch that turns CUDA off is no request for it (gat's README lists --no-cuda)
    (["python", "main.py", "--epochs", "300", "--no-cuda"], None),
    (["python", "main.py", "--disable_cuda", "--no-nccl"], None),
    (["python", "main.py", "--no-cuda", "--device", "cuda"], "expected"),
])
def test_expectation_from_the_command(command, level, tmp_path):
    ctx = Context(command=command, cwd=tmp_path, env={})
    assert expectation(ctx).level == level


def test_torchrun_process_count_is_read():
    ctx = Context(command=["torchrun", "--nproc-per-node=8", "train.py"], env={})
    assert expectation(ctx).nproc == 8


def test_require_gpu_and_config_win(tmp_path):
    assert expectation(Context(require_gpu=True, env={})).level == "required"
    ctx = Context(command=["python", "t.py", "--device", "cuda"], env={},
                  config={"checks": {"cuda.init": {"expect_gpu": False}}})
    assert expectation(ctx).level is None


def test_script_that_needs_cuda_without_fallback_hints(tmp_path: Path):
    (tmp_path / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (tmp_path / "portable.py").write_text("device = 'cuda' if torch.cuda.is_available() else 'cpu'\n")
    hinted = expectation(Context(command=["python", "train.py"], cwd=tmp_path, env={}))
    assert hinted.level == "hinted" and "train.py" in hinted.reason
    assert expectation(Context(command=["python", "portable.py"], cwd=tmp_path, env={})).level is None


def test_a_device_option_that_defaults_to_cpu_asks_for_no_gpu(tmp_path: Path):
    """karpathy/makemore: `--device` defaults to 'cpu', and `if args.device.startswith('cuda'):
    torch.cuda.synchronize()` only follows it; `check` of its README line warned "no usable GPU: makemore.py uses
    CUDA ('cuda') with no CPU fallback" on a CPU machine. A `--device cuda` on the command still asks for one."""
    (tmp_path / "makemore.py").write_text(
        "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--device', type=str, default='cpu', help='cpu|cuda|cuda:2|mps')\n"
        "args = parser.parse_args()\nif args.device.startswith('cuda'):\n    torch.cuda.synchronize()\n")
    quiet = expectation(Context(command=["python", "makemore.py", "-i", "names.txt"], cwd=tmp_path, env={}))
    assert quiet.level is None and "--device is 'cpu' here (its default)" in quiet.reason, quiet.reason
    asked = expectation(Context(command=["python", "makemore.py", "--device", "cuda"], cwd=tmp_path, env={}))
    assert asked.level == "expected", asked.reason


def test_launcher_script_is_read(tmp_path: Path):
    (tmp_path / "run.sh").write_text("#!/bin/sh\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py\n")
    exp = expectation(Context(launcher=Path("run.sh"), cwd=tmp_path, env={}))
    assert exp.level == "expected" and "CUDA_VISIBLE_DEVICES" in exp.reason


def test_stack_excerpt_puts_the_main_thread_first():
    stderr = ("some warning\n"
              "Thread 0x00007f01 (most recent call first):\n"
              "  File \"/x/threading.py\", line 320 in wait\n\n"
              "Current thread 0x00007f00 (most recent call first):\n"
              "  File \"/x/torch/cuda/__init__.py\", line 38 in _init\n"
              "  File \"/x/probe.py\", line 251 in main\n"
              "  File \"/x/probe.py\", line 268 in <module>\n")
    stack = stack_excerpt(stderr)
    assert stack[0].startswith("Current thread") and "line 38 in _init" in stack[1]
    assert any("threading.py" in l for l in stack)


@pytest.mark.parametrize("source, said", [
    # an argparse --device: the project's own spelling
    ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n"
     "device = 'cuda'\n", " (this script takes --device cpu)"),
    # nanoGPT's configurator: key=value
    ("device = 'cuda'\nexec(open('configurator.py').read())\n", " (this script takes --device=cpu)"),
    # the word '--device' in a message is no option: nothing is claimed
    ("device = 'cuda'\nprint('pass --device to the other tool')\nprint('--device')\n", ""),
])
def test_a_cuda_default_names_the_device_option_only_where_the_project_has_one(tmp_path: Path, source, said):
    (tmp_path / "train.py").write_text(source)
    exp = expectation(Context(command=["python", "train.py"], cwd=tmp_path, env={}))
    assert exp.level == "expected" and exp.reason.endswith("does not override it" + said), exp.reason
