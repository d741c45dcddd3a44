"""The gate never fails a healthy CPU job: `dfdoctor check` before `torchrun --nproc_per_node=2` of a DDP job on
this CPU-only torch reads the job's process-group backend in every form a script spells it (tests/jobs/ddp_cpu) and
tests that backend, so it exits 0 for each job that runs here, and still fails the one that cannot."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose.pg_backend import read_backend
from jobs.harness import JOBS, dfdoctor, job_env
from test_realworld import REALWORLD

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
DDP = JOBS / "ddp_cpu"
HEALTHY = [("positional.py",), ("keyword.py",), ("variable.py",), ("enum.py",), ("absent.py",), ("chooses.py",),
           ("framework.py",), ("option.py", "--dist-backend", "gloo")]


@pytest.mark.parametrize("script, with_gpu, without_gpu, words", [
    ("positional.py", "gloo", "gloo", "positional.py:5 calls init_process_group with the backend 'gloo'"),
    ("keyword.py", "gloo", "gloo", "keyword.py:5 calls init_process_group with the backend 'gloo'"),
    ("variable.py", "gloo", "gloo", "variable.py:6 sets backend = 'gloo'"),
    ("enum.py", "gloo", "gloo", "enum.py:6 calls init_process_group with Backend.GLOO"),
    ("absent.py", "cuda:nccl,cpu:gloo", "gloo", "absent.py:5 calls init_process_group with no backend"),
    ("chooses.py", "nccl", "gloo", "chooses.py:5 chooses the backend by torch.cuda.is_available()"),
    ("device_map.py", "cuda:nccl,cpu:gloo", "cuda:nccl,cpu:gloo", "device_map.py:5"),
    ("option.py", "nccl", "nccl", "option.py:8 gives --dist-backend the default 'nccl'"),
])
def test_every_spelling_of_the_backend_is_read(script, with_gpu, without_gpu, words):
    read = read_backend(["torchrun", "--nproc_per_node=2", script], DDP)
    assert read is not None and (read.with_gpu, read.without_gpu) == (with_gpu, without_gpu), read
    assert words in read.why, read.why


def test_what_is_not_plain_is_not_read_and_the_command_wins(tmp_path):
    assert read_backend(["torchrun", "framework.py"], DDP) is None  # the group starts in another module
    read = read_backend(["torchrun", "option.py", "--dist-backend=gloo"], DDP)
    assert read.on(False) == "gloo" and read.option == "--dist-backend", read
    (tmp_path / "two.py").write_text("import torch.distributed as d\nd.init_process_group('gloo')\n"
                                     "d.init_process_group('nccl')\n")
    (tmp_path / "kw.py").write_text("import torch.distributed as d\nd.init_process_group(**opts)\n")
    (tmp_path / "cfg.py").write_text("import torch.distributed as d\nd.init_process_group(cfg.make_backend())\n")
    for script in ("two.py", "kw.py", "cfg.py"):
        assert read_backend(["torchrun", script], tmp_path) is None, script


def test_a_configurator_name_is_the_scripts_own_option(tmp_path):
    """nanoGPT's form: a module-level `backend = 'nccl'` that `--backend=gloo` overrides through configurator.py."""
    (tmp_path / "train.py").write_text("backend = 'nccl'\nexec(open('configurator.py').read())\n"
                                       "import torch.distributed as d\nd.init_process_group(backend=backend)\n")
    read = read_backend(["torchrun", "train.py"], tmp_path)
    assert read.always_nccl() and read.option == "--backend" and "train.py:1 sets backend = 'nccl'" in read.why


def _check(work: Path, *command: str, only: bool = True) -> tuple[subprocess.CompletedProcess, dict]:
    out = work / "check.json"
    proc = dfdoctor("check", "--cwd", str(work), *(["--only", "cuda.nccl"] if only else []), "--format", "json",
                    "--output", str(out), "--", TORCHRUN, "--nproc_per_node=2", *command, cwd=work)
    return proc, json.loads(out.read_text())


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict:
    """Each job itself, with one rank: whether it runs here is its backend's question (a backend this torch lacks
    fails init_process_group in every rank, the first included), and the two-rank group of that backend is what
    cuda.nccl's own probe forms (the tests assert "2 ranks formed a group"). All the jobs in one interpreter, each
    with the variables torchrun gives a rank (tests/jobs/one_rank_each.py): a torchrun of each, an agent and a
    rank importing torch, cost ~2.8 CPU-s a job (the file: 46 CPU-s, 20.5 so) and proved no more. What each did,
    by its command."""
    work = tmp_path_factory.mktemp("alone") / "job"
    shutil.copytree(DDP, work)
    commands = [*HEALTHY, ("option.py",)]
    out = work / "alone.json"
    p = subprocess.run([sys.executable, str(JOBS / "one_rank_each.py"), str(out), json.dumps(commands)], cwd=work,
                       env=job_env(), capture_output=True, text=True, timeout=120)
    assert out.exists(), p.stderr[-2000:]
    return {tuple(r["argv"]): r for r in json.loads(out.read_text())}


def _nccl(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "cuda.nccl")


@pytest.mark.slow
@pytest.mark.parametrize("command", HEALTHY, ids=lambda c: c[0])
def test_check_passes_every_healthy_cpu_ddp_job(tmp_path, alone, command):
    work = tmp_path / "job"
    shutil.copytree(DDP, work)
    job = alone[command]
    assert job["rc"] == 0 and "all-reduced 1" in job["stdout"], job["stderr"][-2000:]  # the job itself is healthy
    # the whole check for the tutorial's form and the framework's, cuda.nccl alone for the rest (the same decision)
    proc, rep = _check(work, *command, only=command[0] not in ("positional.py", "framework.py"))
    rec = _nccl(rep)
    assert proc.returncode == 0, (rec, proc.stdout[-2000:])
    assert rec["status"] == "ok" and rec["summary"].startswith("gloo: 2 ranks formed a group"), rec


@pytest.mark.slow
def test_check_still_fails_the_job_that_cannot_run_here_and_says_where_it_sets_the_backend(tmp_path, alone):
    work = tmp_path / "job"
    shutil.copytree(DDP, work)
    job = alone[("option.py",)]
    assert job["rc"] != 0 and "NCCL" in job["stderr"]  # the job itself fails: NCCL is not built into this torch
    proc, rep = _check(work, "option.py")
    rec = _nccl(rep)
    assert proc.returncode == 1 and rec["status"] == "fail" and rec["cause"] == causes.NCCL_FAILED, rec
    assert "--dist-backend=gloo" in rec["fix"] and "option.py:8" in rec["fix"], rec["fix"]


@pytest.mark.slow
@pytest.mark.skipif(REALWORLD is None, reason="../shared/realworld (nanoGPT) is not beside the repo")
def test_nanogpt_under_torchrun_passes_with_its_own_override_and_is_told_it_without(tmp_path):
    """Unmodified nanoGPT: `backend = 'nccl'` at train.py:70, overridden by its configurator's --backend=gloo: the
    gloo group is the one tested (test_realworld asserted that in a check of its own: cuda.nccl of nanoGPT's
    torchrun line with --backend=gloo, as here, for ~1.6 CPU-s)."""
    work = tmp_path / "nanoGPT"
    shutil.copytree(REALWORLD / "nanoGPT", work)
    line = ("train.py", "config/train_shakespeare_char.py", "--device=cpu", "--compile=False")
    proc, rep = _check(work, *line, "--backend=gloo")
    rec = _nccl(rep)
    assert proc.returncode == 0 and rec["status"] == "ok", rec
    assert rec["summary"].startswith("gloo: 2 ranks formed a group"), rec
    proc, rep = _check(work, *line)
    rec = _nccl(rep)
    assert proc.returncode == 1 and rec["cause"] == causes.NCCL_FAILED, rec
    assert "adding --backend=gloo to the command (train.py:70 sets backend = 'nccl'" in rec["fix"], rec["fix"]
