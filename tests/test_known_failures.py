"""The corpus of real failures (doctor/diagnose/known_failures.py): every row recognises its recorded traceback
(tests/samples/tracebacks/), the ones a CPU can raise are raised for real by real torch (tests/jobs/real_failures.py),
and every verdict blames the job's own line, never the library's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose import known_failures
from dfdoctor.diagnose.rules_runtime import Context
from dfdoctor.diagnose.traceback import parse_python_error

SAMPLES = Path(__file__).parent / "samples" / "tracebacks"
JOB = Path(__file__).parent / "jobs" / "real_failures.py"
LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python3")
KEYS = [r.key for r in known_failures.CORPUS]


def diagnose(text: str, cwd: str = "/home/ana/proj") -> tuple:
    err = parse_python_error(text)
    assert err is not None, text
    return err, known_failures.classify(err, Context(cwd=cwd, local=False))


def row_of(found) -> str:
    """The corpus key a finding names in its evidence."""
    return next(re.search(r"known failure '([\w-]+)'", e).group(1) for e in found.evidence if "known failure" in e)


def test_the_corpus_holds_forty_distinct_messages_each_with_a_known_cause_and_a_source():
    assert len(set(KEYS)) == len(KEYS) >= 40
    assert len({(r.pattern, r.refine) for r in known_failures.CORPUS}) == len(KEYS)  # one message, two readings: a log or an input
    for r in known_failures.CORPUS:
        assert r.cause in causes.ALL, r.key
        assert r.source.startswith("https://github.com/") or r.source == known_failures.UNCHECKED, r.key
        re.compile(r.pattern)


@pytest.mark.parametrize("key", KEYS)
def test_recorded_traceback_is_recognised_and_blames_the_users_line(key):
    err, found = diagnose((SAMPLES / f"{key}.txt").read_text())
    assert found is not None, err.headline
    assert row_of(found) == key and found.cause == known_failures.row(key).cause
    assert "/home/ana/proj/train.py" in found.summary, found.summary  # the user's line, not torch's
    assert not LIBRARY.search(found.fix), found.fix  # never "fix site-packages/torch/..."
    if err.in_library:
        assert any(e.startswith("raised inside") and err.file in e for e in found.evidence)  # kept as evidence


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict:
    """Every scenario of tests/jobs/real_failures.py, raised once by real torch on this CPU."""
    work = tmp_path_factory.mktemp("real_failures")
    out = subprocess.run([sys.executable, str(JOB), str(work)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return {"work": str(work), **json.loads(out.stdout)}


REAL = ["torch-not-compiled-with-cuda", "no-accelerator", "cuda-call-on-cpu-build", "nccl-not-built", "env-var-expected", "rank-keyerror",
        "process-group-not-initialized", "port-in-use", "weights-only-refused", "state-dict-size-mismatch",
        "state-dict-keys", "checkpoint-truncated", "invalid-load-key", "cuda-home-missing", "cannot-import-name",
        "worker-exited", "save-folder-missing", "numpy-removed-alias", "matmul-shapes",
        "batch-size-mismatch", "dtype-mismatch", "inplace-modified", "backward-twice", "no-grad-fn",
        "target-out-of-bounds", "embedding-index", "worker-pickle", "log-folder-missing", "input-file-missing"]


@pytest.mark.slow
@pytest.mark.parametrize("key", REAL)
def test_real_torch_raises_it_and_the_row_names_it_at_the_jobs_line(real, key):
    text = real[key]
    assert text, f"{key}: the scenario did not fail"
    err, found = diagnose(text, cwd=real["work"])
    assert found is not None, err.headline
    assert row_of(found) == key, (row_of(found), err.headline)
    assert str(JOB) in found.summary  # the job's own line
    assert not LIBRARY.search(found.fix), found.fix


def test_weights_only_fix_names_the_refused_class():
    _, found = diagnose((SAMPLES / "weights-only-refused.txt").read_text())
    assert "add_safe_globals([argparse.Namespace])" in found.fix


def test_state_dict_prefix_is_named_with_the_line_to_strip_it():
    _, found = diagnose((SAMPLES / "state-dict-keys.txt").read_text())
    assert "`module.`" in found.fix and "removeprefix('module.')" in found.fix


def test_map_location_is_added_to_the_users_own_load_line():
    _, found = diagnose((SAMPLES / "checkpoint-on-cuda.txt").read_text())
    assert "`state = torch.load('ckpt.pt', map_location='cpu')`" in found.fix


def test_a_log_folder_is_not_a_missing_input_and_a_missing_input_is_not_a_log():
    _, log = diagnose((SAMPLES / "log-folder-missing.txt").read_text())
    _, data = diagnose((SAMPLES / "input-file-missing.txt").read_text())
    assert log.cause == causes.LOG_DIR_MISSING and "train.py, line 15" in log.summary
    assert "mkdir -p /home/ana/proj/outputs/run7" in log.fix
    assert data.cause == causes.INPUT_MISSING and "/home/ana/proj/data/shakespeare_char/train.bin" in data.summary


def test_an_input_beside_the_script_that_makes_it_names_that_script(tmp_path):
    (tmp_path / "data" / "shakespeare_char").mkdir(parents=True)
    (tmp_path / "data" / "shakespeare_char" / "prepare.py").write_text(
        "import requests\nopen('train.bin', 'wb').write(requests.get('https://x').content)\n")
    text = (SAMPLES / "input-file-missing.txt").read_text().replace("/home/ana/proj", str(tmp_path))
    _, found = diagnose(text, cwd=str(tmp_path))
    assert "Run `python data/shakespeare_char/prepare.py` first" in found.fix
    assert "downloads" in found.fix and "did not try" in found.fix


def test_torch_pairs_name_the_release_and_the_index_of_the_installed_torch():
    from dfdoctor.diagnose import torch_pairs

    assert torch_pairs.paired("2.13.0+cpu", "torchvision") == "0.28.0"
    assert torch_pairs.paired("2.5.1", "torchvision") == "0.20.1"
    assert torch_pairs.paired("2.0.1", "torchvision") == "0.15.2" and torch_pairs.paired("2.0.1", "torchaudio") == "2.0.2"
    assert torch_pairs.paired("1.13.1", "torchvision") == "0.14.1"
    assert torch_pairs.install_line("2.13.0+cpu", ["torchvision"], "py") == (
        "py -m pip install torch==2.13.0+cpu torchvision==0.28.0+cpu --index-url https://download.pytorch.org/whl/cpu")
    assert torch_pairs.install_line("2.4.0+cu121", ["torchaudio"], "py").endswith(
        "torchaudio==2.4.0+cu121 --index-url https://download.pytorch.org/whl/cu121")
    assert torch_pairs.install_line("2.6.0", ["torchvision"], "py") == "py -m pip install torch==2.6.0 torchvision==0.21.0"


def _local(text: str, tmp_path, *argv: str):
    err = parse_python_error(text)
    return known_failures.classify(err, Context(cwd=str(tmp_path), local=True, argv=list(argv)))


def test_a_save_into_a_missing_folder_names_the_option_that_sets_the_path(tmp_path):
    """torch.save's own words ("Parent directory X does not exist") and the project's --save (the output_dir
    refiner): the fix says which option of this project names the path."""
    (tmp_path / "main.py").write_text("import argparse\np = argparse.ArgumentParser()\n"
                                      "p.add_argument('--save', type=str, default='model.pt')\n")
    text = (f'Traceback (most recent call last):\n  File "{tmp_path}/main.py", line 9, in <module>\n'
            "    torch.save(model, f)\n"
            '  File "/v/lib/python3.11/site-packages/torch/serialization.py", line 9, in save\n    raise\n'
            "RuntimeError: Parent directory checkpoints does not exist.\n")
    found = _local(text, tmp_path, "python", "main.py", "--save", "checkpoints/model.pt")
    assert found.cause == causes.OUTPUT_DIR_MISSING
    assert "point --save into a folder that exists" in found.fix and f"mkdir -p {tmp_path}/checkpoints" in found.fix
    assert any("--save sets this path (the command gives 'checkpoints/model.pt'" in e for e in found.evidence)


def test_a_device_index_on_a_cpu_build_is_cuda_unavailable_in_the_projects_terms(tmp_path):
    """torch 2.9+'s `model.to(0)` on a CPU build: cuda-unavailable at the job's line, and the fix uses the
    project's own device switch where it has one (here --cpu), never a --device it lacks."""
    (tmp_path / "train.py").write_text("import argparse\np = argparse.ArgumentParser()\n"
                                       "p.add_argument('--cpu', action='store_true')\n")
    text = (SAMPLES / "no-accelerator.txt").read_text().replace("/home/ana/proj", str(tmp_path))
    found = _local(text, tmp_path, "python", "train.py")
    assert found.cause == causes.CUDA_UNAVAILABLE and f"{tmp_path}/train.py" in found.summary
    assert "add --cpu to the command" in found.fix and "--device" not in found.fix


@pytest.mark.parametrize("source, argv, want", [
    ("compile = True\nexec(open('configurator.py').read())\n", (), "add --compile=False to the command"),
    ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--compile', action='store_true')\n",
     ("--compile",), "drop --compile from the command"),
    ("import torch\nmodel = torch.compile(torch.nn.Linear(2, 2))\n", (), "skip the torch.compile call at train.py:2"),
])
def test_without_a_compiler_the_fix_runs_without_torch_compile_in_the_projects_terms(tmp_path, source, argv, want):
    """Only an option the project has (`--compile=False` is nanoGPT's), else the line that compiles."""
    (tmp_path / "train.py").write_text(source)
    text = (SAMPLES / "compiler-missing.txt").read_text().replace("/home/ana/proj", str(tmp_path))
    found = _local(text, tmp_path, "python", "train.py", *argv)
    assert found.cause == causes.BUILD_ENV_MISSING and want in found.fix, found.fix
    if "torch.compile(" in source:  # no option: none named
        assert "--compile" not in found.fix
