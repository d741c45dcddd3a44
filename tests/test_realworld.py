"""dfdoctor on unmodified public projects (../shared/realworld: nanoGPT, pytorch/examples mnist), each copied into a
temporary folder and run as its README runs it, on this CPU-only torch. The verdicts must be in the user's terms:
the user's line, the project's own override, the script that makes the missing file, the package pair to install."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose import known_failures, torch_pairs
from dfdoctor.diagnose.rules_runtime import Context
from dfdoctor.diagnose.traceback import parse_python_error
from jobs.harness import PY, dfdoctor, job_env, kill_runs, launch, status
from support.in_process import run_here
from support.made_once import made_once, session_folder

REPO = Path(__file__).resolve().parent.parent


def _realworld() -> Path | None:
    """../shared/realworld from the repo root (CI and the main checkout), or from a worktree's parent folder."""
    for root in (REPO.parent, REPO.parent.parent):
        if (root / "shared" / "realworld" / "nanoGPT" / "train.py").is_file():
            return root / "shared" / "realworld"
    return None


REALWORLD = _realworld()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    REALWORLD is None, reason="../shared/realworld (nanoGPT, pytorch-examples-mnist) is not beside the repo")]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


@pytest.fixture
def nanogpt(tmp_path):
    work = tmp_path / "nanoGPT"
    shutil.copytree(REALWORLD / "nanoGPT", work)
    yield work
    kill_runs(work)


@pytest.fixture
def mnist(tmp_path):
    work = tmp_path / "mnist"
    shutil.copytree(REALWORLD / "pytorch-examples-mnist", work)
    yield work
    kill_runs(work)


def _ended(work: Path, deadline_s: float = 90) -> dict:
    """`status` until the job has ended (its verdict is no longer `running`)."""
    end = time.monotonic() + deadline_s
    while True:
        _, rep = status(work)
        if rep["verdict"]["state"] != "running" or time.monotonic() > end:
            return rep["verdict"]
        time.sleep(1)


def _final(work: Path, rep: dict) -> dict:
    """The job's verdict once it has ended: the launch's own, where its watch saw the end (a `status` after it
    said the same again, for ~0.3 CPU-s), else `status`'s."""
    return rep["verdict"] if rep["verdict"]["state"] != "running" else _ended(work)


def test_nanogpt_default_device_on_cpu_torch_blames_model_to_device_and_offers_its_override(nanogpt):
    proc, rep = launch(nanogpt, PY, "train.py", "config/train_shakespeare_char.py", watch=60, log=None)
    v = _final(nanogpt, rep)
    assert v["cause"] == causes.CUDA_UNAVAILABLE, v
    assert "train.py, line 193 (`model.to(device)`)" in v["summary"] and "train.py:72" in v["summary"], v["summary"]
    assert "--device=cpu" in v["fix"] and "site-packages" not in v["fix"], v["fix"]
    assert any("raised inside" in e and "torch/cuda/__init__.py" in e for e in v["evidence"])  # kept as evidence


def test_nanogpt_cuda_init_notices_the_scripts_default_device_before_the_launch(nanogpt):
    proc = dfdoctor("check", "--cwd", str(nanogpt), "--only", "cuda.init", "--format", "json", "--",
                    PY, "train.py", "config/train_shakespeare_char.py", cwd=nanogpt)
    rec = json.loads(proc.stdout)["checks"][0]
    assert rec["status"] in ("warn", "fail") and rec["cause"] == causes.CUDA_UNAVAILABLE, rec
    assert "train.py:72 sets device = 'cuda'" in rec["summary"] and "--device=cpu" in rec["fix"], rec
    proc = run_here("check", "--cwd", str(nanogpt), "--only", "cuda.init", "--format", "json", "--",  # here
                    PY, "train.py", "--device=cpu", cwd=nanogpt, full_env=job_env())
    assert json.loads(proc.stdout)["checks"][0]["status"] == "skip"  # overridden: nothing asks for a GPU


def test_nanogpt_without_prepared_data_is_input_missing_with_the_script_that_makes_it(nanogpt):
    proc, rep = launch(nanogpt, PY, "train.py", "config/train_shakespeare_char.py", "--device=cpu",
                       "--compile=False", watch=60, log=None)
    v = _final(nanogpt, rep)
    assert v["cause"] == causes.INPUT_MISSING, v
    assert "data/shakespeare_char/train.bin" in v["summary"] and "train.py, line" in v["summary"], v["summary"]
    assert str(nanogpt / "data" / "shakespeare_char" / "train.bin") in v["summary"]  # resolved against its cwd
    assert "python data/shakespeare_char/prepare.py" in v["fix"] and "numpy" not in v["fix"], v["fix"]


def test_nanogpt_args_paths_look_where_the_code_joins_the_value_and_leave_the_folder_it_makes(nanogpt):
    """nanoGPT reads `os.path.join('data', dataset)` and makes its --out_dir itself: `check` of the README's line
    said "--dataset shakespeare_char: no such folder (relative to the project)" and "Create out-shakespeare-char"."""
    line = (PY, "train.py", "config/train_shakespeare_char.py", "--device=cpu", "--compile=False")
    proc = dfdoctor("check", "--cwd", str(nanogpt), "--only", "args.paths", "--format", "json", "--", *line,
                    cwd=nanogpt)
    rec = json.loads(proc.stdout)["checks"][0]
    assert rec["status"] == "ok", [rec["summary"], *[f["summary"] for f in rec["findings"]]]
    proc = run_here("check", "--cwd", str(nanogpt), "--only", "args.paths", "--format", "json", "--", *line,
                    "--dataset=shakespeare_chr", cwd=nanogpt, full_env=job_env())  # the same entry, here
    rec = json.loads(proc.stdout)["checks"][0]
    assert rec["status"] == "warn" and "no such folder data/shakespeare_chr" in rec["summary"], rec
    assert "did you mean data/shakespeare_char?" in rec["summary"] and "--dataset=shakespeare_char " in rec["fix"], rec


def test_nanogpt_torchrun_nccl_on_cpu_is_blocked_then_forced_and_linked_to_the_check(nanogpt):
    command = (TORCHRUN, "--standalone", "--nproc_per_node=2", "train.py", "config/train_shakespeare_char.py",
               "--device=cpu", "--compile=False")
    proc, rep = launch(nanogpt, *command, watch=60, log=None, check=True, extra=("--only", "cuda.nccl"))
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == causes.NCCL_FAILED and "Not launched" in v["summary"], v
    assert any("the job uses NCCL: train.py:70 sets backend = 'nccl'" in e for e in v["evidence"]), v["evidence"]
    assert not (nanogpt / ".dfdoctor" / "runs").exists() or not any((nanogpt / ".dfdoctor" / "runs").iterdir())
    proc, rep = launch(nanogpt, *command, watch=60, log=None, check=True, extra=("--only", "cuda.nccl", "--force"))
    v = _final(nanogpt, rep)
    assert v["cause"] == causes.NCCL_FAILED, v
    assert "cuda.nccl predicted this before the launch" in v["summary"], v["summary"]
    assert "train.py, line 84 (`init_process_group(backend=backend)`)" in v["summary"], v["summary"]
    assert "--backend=gloo" in v["fix"] and "distributed_c10d" not in v["fix"], v["fix"]


# nanoGPT under torchrun with --backend=gloo gets its gloo group tested, not NCCL: asserted by test_ddp_cpu_gate's
# test_nanogpt_under_torchrun_passes_with_its_own_override_and_is_told_it_without, whose cuda.nccl check of that
# line was the same as this file's own one (~1.6 CPU-s).


NANOGPT_CPU_LINE = (PY, "train.py", "config/train_shakespeare_char.py", "--device=cpu", "--compile=False")


@pytest.fixture(scope="module")
def nanogpt_smoke(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """`check --only imports.smoke` of nanoGPT's README line for a CPU, its text (stdout) and its JSON (the report
    file): one run for the two tests below, made by whichever xdist worker asks first. Each ran its own before,
    and each imported train.py's modules, torch with them (~1.5 CPU-s)."""
    def run(where: Path) -> None:
        work = where / "nanoGPT"
        shutil.copytree(REALWORLD / "nanoGPT", work)
        proc = dfdoctor("check", "--cwd", str(work), "--only", "imports.smoke", "--format", "json", "--output",
                        str(where / "check.json"), "--format", "text", "--", *NANOGPT_CPU_LINE, cwd=work)
        (where / "run.json").write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
    where = made_once(session_folder(tmp_path_factory) / "realworld-nanogpt-smoke", run)
    returncode, stdout, stderr = json.loads((where / "run.json").read_text())
    assert (where / "check.json").exists(), stdout + stderr
    return subprocess.CompletedProcess(["dfdoctor", "check"], returncode, stdout, stderr), \
        json.loads((where / "check.json").read_text())


def test_nanogpt_imports_smoke_says_nothing_about_the_ranks_its_guard_sets(nanogpt_smoke):
    rec = nanogpt_smoke[1]["checks"][0]
    assert rec["id"] == "imports.smoke", rec
    said = json.dumps([rec["summary"], *[f["summary"] for f in rec["findings"]]])
    assert "RANK" not in said and "ddp_rank" not in said, said
    details = "\n".join(f.get("details") or "" for f in rec["findings"])
    assert "`if ddp` is false here" in details, details


def test_nanogpt_imports_it_never_reaches_are_no_next_step_and_name_the_option_that_reaches_them(nanogpt,
                                                                                                  nanogpt_smoke):
    """nanoGPT imports wandb only under `if wandb_log and master_process:` and transformers only inside
    GPT.from_pretrained, which train.py calls only under `elif init_from.startswith('gpt2'):`. `check` of the
    README's line said `next: pip install wandb transformers`, for a run that reaches neither import. Its text is
    `nanogpt_smoke`'s (the test above reads its JSON)."""
    for name in ("wandb", "transformers"):
        try:
            __import__(name)
            pytest.skip(f"{name} is installed here")
        except ImportError:
            pass
    line = NANOGPT_CPU_LINE
    proc = nanogpt_smoke[0]
    assert proc.returncode == 0 and "next:" not in proc.stdout.split("\n\n")[0], proc.stdout
    assert "train.py imports it only when `wandb_log and master_process` holds (train.py:245), which --wandb_log " \
        "decides (train.py:43, False by default); this launch does not give --wandb_log" in proc.stdout, proc.stdout
    assert "which the job reaches only when `init_from.startswith('gpt2')` holds (train.py:181, the `if` over the " \
        "call of from_pretrained, model.py:207), which --init_from decides (train.py:41, 'scratch' by default)" \
        in proc.stdout, proc.stdout
    assert "fix: Nothing to install for this launch. Before you give --wandb_log=True: " in proc.stdout, proc.stdout
    quiet = run_here("check", "-q", "--cwd", str(nanogpt), "--only", "imports.smoke", "--", *line,
                     "--wandb_log=True", cwd=nanogpt, full_env=job_env())  # now the run gets there: installing wandb
    # is the next step (this run through the same entry here, support/in_process; the text above is a console run)
    assert "; next: " in quiet.stdout and "pip install wandb" in quiet.stdout and "transformers" not in quiet.stdout, \
        quiet.stdout


MNIST_CHECK = ("--only", "deps.requirements", "--only", "imports.smoke", "--", PY, "main.py")


@pytest.fixture(scope="module")
def mnist_check(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """`check` of mnist's README line by deps.requirements and imports.smoke, its text (stdout) and its JSON (the
    report file): one run for the two tests that read it, made by whichever xdist worker asks first. Each test ran
    it before, and each run imported main.py, torch with it (~1.5 of the ~2.4 CPU-s of a test)."""
    def run(where: Path) -> None:
        work = where / "mnist"
        shutil.copytree(REALWORLD / "pytorch-examples-mnist", work)
        proc = dfdoctor("check", "--cwd", str(work), "--format", "json", "--output", str(where / "check.json"),
                        "--format", "text", *MNIST_CHECK, cwd=work)
        (where / "run.json").write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout,
                                                    "stderr": proc.stderr}))
    where = made_once(session_folder(tmp_path_factory) / "realworld-mnist-check", run)
    ran = json.loads((where / "run.json").read_text())
    proc = subprocess.CompletedProcess(["dfdoctor", "check", *MNIST_CHECK], ran["returncode"], ran["stdout"],
                                       ran["stderr"])
    assert (where / "check.json").exists(), proc.stdout + proc.stderr
    return proc, json.loads((where / "check.json").read_text())


def _without_torchvision() -> None:
    try:
        import torchvision  # noqa: F401
        pytest.skip("torchvision is installed here")
    except ImportError:
        pass


def test_mnist_without_torchvision_pins_the_pair_of_the_installed_torch(mnist_check):
    _without_torchvision()
    recs = {r["id"]: r for r in mnist_check[1]["checks"]}
    assert set(recs) == {"deps.requirements", "imports.smoke"}, recs
    torch_v = torch_pairs.installed(PY)["torch"]  # 2.13.0+cpu here: torchvision==0.28.0+cpu from whl/cpu
    for rec in recs.values():
        assert torch_pairs.install_line(torch_v, ["torchvision"], PY) in rec["fix"], rec["fix"]
        assert f"torch=={torch_v}" in rec["fix"] and "pip install torchvision " not in rec["fix"], rec["fix"]


def test_mnist_without_torchvision_is_one_failing_row_and_the_requirement_points_at_it(mnist_check):
    """One missing torchvision was two FAIL rows (deps.requirements' requirements.txt:2 and imports.smoke's
    main.py:6): one cause, one failure; the requirement's row says it is that same cause, and its fix is not said
    twice. The text and the JSON of one `check` (`mnist_check`, which the test above reads too)."""
    _without_torchvision()
    proc, doc = mnist_check
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAIL", "WARN", "ERROR"))]
    assert [r.split()[0] for r in rows if "torchvision" in r] == ["WARN", "FAIL"], rows  # deps, then imports
    assert "No module named 'torchvision', imported at" in rows[1] and "imports.smoke" in rows[1], rows
    assert "requirements.txt:2: torchvision): the same cause as imports.smoke's failure at main.py:6, said there" \
        in rows[0], rows
    assert proc.stdout.count("--index-url https://download.pytorch.org/whl/cpu") == 1, proc.stdout
    recs = {r["id"]: r for r in doc["checks"]}
    assert recs["deps.requirements"]["status"] == "warn" and recs["imports.smoke"]["status"] == "fail", recs
    assert doc["verdict"]["cause"] == causes.MISSING_MODULE and "1 more problem" not in doc["verdict"]["summary"]


def test_mnist_with_a_cuda_torchvision_beside_cpu_torch_is_a_dependency_mismatch(mnist, tmp_path):
    """The installed metadata of PyPI's torchvision 0.28.0 (a CUDA build) beside torch 2.13.0+cpu: deps.requirements
    names the mismatch and the pair; the recorded traceback of that very import names the same."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    info = site / "torchvision-0.28.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\nRequires-Dist: torch"
                                   " ==2.13.0\n")
    env = job_env(PYTHONPATH=str(site))
    proc = dfdoctor("check", "--cwd", str(mnist), "--only", "deps.requirements", "--format", "json", "--",
                    PY, "main.py", cwd=mnist, env=env)
    rec = json.loads(proc.stdout)["checks"][0]
    assert rec["status"] == "fail" and rec["cause"] == causes.DEPENDENCY_MISMATCH, rec
    assert "CPU torch 2.13.0+cpu" in rec["summary"], rec["summary"]
    assert "torchvision==0.28.0+cpu" in rec["fix"] and "whl/cpu" in rec["fix"], rec["fix"]
    text = (Path(__file__).parent / "samples" / "tracebacks" / "realworld-mnist-torchvision-nms.txt").read_text()
    err = parse_python_error(text)
    found = known_failures.classify(err, Context(cwd="/home/ana/mnist", local=False))
    assert found.cause == causes.DEPENDENCY_MISMATCH and "mnist/main.py, line 6" in found.summary
