"""imports.smoke against real broken projects (tests/samples/), run in real training-interpreter subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor.checks.imports_smoke import imports_smoke
from dfdoctor import Status, causes
from dfdoctor.context import Context
from dfdoctor.errors import CheckCannotRun
from support.in_process import run_here

SAMPLES = Path(__file__).resolve().parent / "samples"
PY = sys.executable


def run_check(command: list[str], cwd: Path, timeout: float = 60, env: dict | None = None,
              python: str = PY, launcher: Path | None = None):
    """Run the check the way the runner would (minus the fork) and return its results."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    ctx = Context(command=command, cwd=cwd, python=python, env={**base, **(env or {})}, timeout=timeout,
                  launcher=launcher)
    return imports_smoke.run(ctx)


def worst(results):
    return max(results, key=lambda r: r.status.rank)


@pytest.fixture
def sample(tmp_path: Path):
    """Copy a sample project to a fresh folder (so nothing a check does can touch the originals)."""
    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(SAMPLES / name, dst, symlinks=True)
        return dst
    return copy


@pytest.mark.slow
def test_healthy_script_imports_torch_and_never_runs_its_body(sample, tmp_path: Path) -> None:
    proj = sample("imports_ok")
    marker = tmp_path / "body-ran"
    results = run_check([PY, "train.py"], proj, env={"DFDOCTOR_SAMPLE_MARKER": str(marker)})
    r = worst(results)
    assert r.status is Status.OK, r
    assert not marker.exists(), "the script's main body ran"
    names = {i["name"]: i for i in r.data["imports"]}
    assert names["torch"]["status"] == "ok"
    assert names["blocks"]["status"] == "ok"  # only importable after the script's own sys.path.insert
    assert names["wandb_not_installed_here"]["kind"] == "optional"
    assert "lazy_helper.py" in r.details  # a module imported inside a function is still compiled


def test_syntax_error_in_the_script_has_file_line_and_caret(sample) -> None:
    proj = sample("syntax_error")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.SYNTAX_ERROR)
    assert f"{proj / 'train.py'}:4" in r.summary
    assert "def train(cfg:" in r.evidence[1]
    caret = r.evidence[2]
    assert caret.strip() == "^" and caret.index("^") == r.evidence[1].index("(")


def test_syntax_error_in_a_local_module(sample) -> None:
    proj = sample("syntax_in_module")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.SYNTAX_ERROR)
    assert f"{proj / 'drafter.py'}:6" in r.summary
    assert "range(4]" in r.evidence[1] and "^" in r.evidence[2]


def test_missing_module_names_module_and_line(sample) -> None:
    proj = sample("missing_module")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.MISSING_MODULE)
    assert "dflash_block_kernels_not_installed" in r.summary
    assert f"{proj / 'train.py'}:3" in r.summary
    assert r.evidence[0].endswith("import dflash_block_kernels_not_installed")
    assert "pip install dflash-block-kernels-not-installed" in r.fix and PY in r.fix


def test_missing_module_deep_in_a_local_module(sample) -> None:
    proj = sample("missing_transitive")
    r = worst(run_check([PY, "train.py"], proj))
    assert r.cause == causes.MISSING_MODULE
    assert "webdataset_not_installed_here" in r.summary and "needed by data" in r.summary
    assert any(f"{proj / 'data.py'}:4" in e for e in r.evidence)


def test_import_error_carries_the_traceback_tail(sample) -> None:
    proj = sample("import_error")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.IMPORT_ERROR)
    assert "KeyError" in r.summary and "DFLASH_NUM_DRAFTERS" in r.summary
    assert "config.py\", line 4" in r.details and "import_probe.py" not in r.details
    # with the variable set, as the real job would have it, the same project is fine
    assert worst(run_check([PY, "train.py"], proj, env={"DFLASH_NUM_DRAFTERS": "4"})).status is Status.OK


def test_import_hang_reports_every_threads_stack_in_time(sample) -> None:
    proj = sample("import_hang")
    t0 = time.monotonic()
    r = worst(run_check([PY, "train.py"], proj, timeout=5))
    elapsed = time.monotonic() - t0
    assert (r.status, r.cause) == (Status.FAIL, causes.IMPORT_HANG)
    assert elapsed < 5, f"took {elapsed:.1f} s for a 5 s budget"
    assert "loader" in r.summary
    assert "_warm_cache" in r.details  # the other thread's stack is there too
    assert any("loader.py" in e and "<module>" in e for e in r.evidence)  # where the main thread waits


def test_crash_on_import_is_an_import_error_naming_the_signal(sample) -> None:
    proj = sample("segfault")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.IMPORT_ERROR)
    assert "SIGSEGV" in r.summary and "fastkernels" in r.summary


def test_launcher_is_followed_to_the_python_it_runs(sample) -> None:
    proj = sample("launcher")
    r = worst(run_check([str(proj / "launch.sh")], Path("/")))
    assert r.cause == causes.MISSING_MODULE and "flash_attn_not_installed_here" in r.summary
    assert r.data["launch"]["launcher"] == str(proj / "launch.sh")
    assert r.data["launch"]["unbuffered"] is True
    # the same launcher given as --launcher, with no command
    r = worst(run_check([], proj, launcher=proj / "launch.sh"))
    assert r.cause == causes.MISSING_MODULE


def test_dash_m_package_module_with_relative_imports(sample) -> None:
    proj = sample("pkg_module")
    r = worst(run_check([PY, "-m", "drafter.train"], proj))
    assert r.cause == causes.MISSING_MODULE
    assert "drafter.attention" in r.summary
    r = worst(run_check([PY, "-m", "drafter.nope"], proj))
    assert r.cause == causes.MISSING_MODULE and "drafter.nope" in r.summary


def test_optional_and_conditional_imports(sample) -> None:
    proj = sample("optional_import")
    results = run_check([PY, "train.py"], proj)
    r = worst(results)
    # the try/except ImportError one is handled by the script; the if-guarded one is only a warning
    assert (r.status, r.cause) == (Status.WARN, causes.MISSING_MODULE)
    assert "apex_not_installed_here" in r.summary
    assert not any("deepspeed" in x.summary for x in results if x.status is not Status.OK)


def test_command_not_found_variants(sample, tmp_path: Path) -> None:
    proj = sample("missing_module")
    for cmd, needle in (([PY, "trian.py"], "trian.py"), (["python3.99", "train.py"], "python3.99"),
                        ([str(tmp_path / "venv/bin/python"), "train.py"], "venv/bin/python"),
                        (["./launch.sh"], "launch.sh")):
        r = worst(run_check(cmd, proj))
        assert (r.status, r.cause) == (Status.FAIL, causes.COMMAND_NOT_FOUND), cmd
        assert needle in r.summary
    # an interpreter (--python) that cannot start at all
    r = worst(run_check(["python3", "train.py"], proj, python=str(tmp_path / "no-such-python")))
    assert r.cause == causes.COMMAND_NOT_FOUND


def test_non_python_and_empty_commands_are_skipped(tmp_path: Path) -> None:
    assert worst(run_check([], tmp_path)).status is Status.SKIP
    assert worst(run_check(["ls", "-l"], tmp_path)).status is Status.SKIP


@pytest.mark.skipif(not Path("/root/.pyenv/versions/2.7.18/bin/python").exists(), reason="needs a Python 2")
def test_python2_interpreter_cannot_run_the_probe(sample) -> None:
    """The check says it could not look (the runner makes that its `error`: tests/test_old_pythons.py)."""
    proj = sample("missing_module")
    py2 = "/root/.pyenv/versions/2.7.18/bin/python"
    with pytest.raises(CheckCannotRun, match="cannot run in the training interpreter .*import_probe.py"):
        run_check([py2, "train.py"], proj, python=py2)


def test_no_process_left_after_a_hang(sample) -> None:
    proj = sample("import_hang")
    before = {p.pid for p in psutil.process_iter()}
    run_check([PY, "train.py"], proj, timeout=4)
    time.sleep(0.2)
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if p.pid not in before and str(proj) in " ".join(p.info["cmdline"] or [])]
    assert not leftovers


def test_cli_end_to_end_json_and_junit(dfdoctor, sample, tmp_path: Path) -> None:
    proj = sample("missing_module")
    out_json, out_xml = tmp_path / "o.json", tmp_path / "o.xml"
    res = dfdoctor("check", "--only", "imports.smoke", "--cwd", str(proj), "--format", "json", "--output",
                   str(out_json), "--format", "junit", "--output", str(out_xml), "--", PY, "train.py")
    assert res.returncode == 1, res.stderr
    doc = json.loads(out_json.read_text())
    chk = next(c for c in doc["checks"] if c["id"] == "imports.smoke")
    assert chk["cause"] == "missing-module" and "train.py:3" in chk["summary"]
    assert "missing-module" in out_xml.read_text()


def test_missing_module_imported_inside_a_function_is_a_warning(sample) -> None:
    """Imported inside a function: a warning, said with the `if` it sits under (round 16: an import under an `if`
    inside a function was dropped); one under a try that handles ImportError is the script's own affair."""
    proj = sample("lazy_import")
    results = run_check([PY, "train.py"], proj)
    r, cond = [x for x in results if x.status is Status.WARN]
    assert r.cause == causes.MISSING_MODULE
    assert "rouge_score_not_installed_here" in r.summary and f"{proj / 'train.py'}:6" in r.summary
    assert r.summary.endswith(": the job fails when it gets there"), r.summary
    assert cond.cause == causes.MISSING_MODULE and cond.summary == (
        f"No module named 'wandb_not_installed_here', imported inside a function at {proj / 'train.py'}:12 under "
        "`if enabled` (line 11): the job fails if that branch runs"), cond.summary
    assert not any("tensorboard" in x.summary for x in results)


def test_zip_application_is_only_checked_to_exist(tmp_path: Path) -> None:
    import zipfile
    with zipfile.ZipFile(tmp_path / "app.pyz", "w") as z:
        z.writestr("__main__.py", "import nothing_here\n")
    r = worst(run_check([PY, "app.pyz"], tmp_path))
    assert r.status is Status.OK and "not Python source" in r.details


@pytest.mark.slow
def test_torchrun_script_sees_a_workers_environment(sample) -> None:
    proj = sample("torchrun_env")
    torchrun = str(Path(PY).parent / "torchrun")
    results = run_check([torchrun, "--nproc_per_node", "2", "train.py"], proj)
    r = worst(results)
    assert r.status is Status.OK, r
    names = [i["name"] for i in r.data["imports"]]
    assert names[0] == "torch.distributed.run"  # what torchrun itself imports comes first
    # run directly with python, the same script fails at import: a real launch without torchrun would too, and the
    # corpus of real failures names why (a variable only torchrun sets)
    direct = worst(run_check([PY, "train.py"], proj))
    assert direct.cause == causes.DISTRIBUTED_ENV_MISSING and "torchrun" in direct.fix, direct


def test_os_exit_at_import_is_an_early_exit(sample) -> None:
    proj = sample("exit_on_import")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.EXITED_EARLY)
    assert "setup_env" in r.summary and "exit status 0" in r.summary
    assert r.evidence[0].startswith(f"{proj / 'train.py'}:3")


def test_module_level_statement_that_fails_at_start(sample) -> None:
    proj = sample("env_at_start")
    r = worst(run_check([PY, "train.py"], proj))
    assert (r.status, r.cause) == (Status.FAIL, causes.IMPORT_ERROR)
    assert f"{proj / 'train.py'}:4" in r.summary and "KeyError" in r.summary and "LOCAL_RANK" in r.summary
    # with the variable present (as torchrun would set it), it is fine
    assert worst(run_check([PY, "train.py"], proj, env={"LOCAL_RANK": "0"})).status is Status.OK


@pytest.mark.slow
def test_accelerate_launcher_whose_package_is_gone(tmp_path: Path) -> None:
    """An `accelerate` script left on PATH after its package was uninstalled: the workers never start. The script
    it would run is a healthy one that imports no torch: the launcher's own import is what fails (imports_ok's
    `import torch` cost ~1 CPU-s here and proved nothing of it)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("import json\n\nprint(json.dumps({'step': 1}))\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    acc = bindir / "accelerate"
    acc.write_text(f"#!{PY}\nfrom accelerate.commands.accelerate_cli import main\nmain()\n")
    acc.chmod(0o755)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    results = run_check(["accelerate", "launch", "--num_processes", "2", "train.py"], proj, env=env)
    r = worst(results)
    assert (r.status, r.cause) == (Status.FAIL, causes.MISSING_MODULE)
    assert "No module named 'accelerate'" in r.summary


OLD_PYTHONS = [p for p in ("/root/.pyenv/versions/3.7.16/bin/python", "/root/.pyenv/versions/3.8.18/bin/python")
               if Path(p).exists()]


@pytest.mark.parametrize("py", OLD_PYTHONS or [pytest.param(None, marks=pytest.mark.skip(reason="no old Python here"))])
def test_older_training_interpreters(sample, py) -> None:
    """The probe runs on the job's Python, old ones included (their AST differs: the main guard still counts)."""
    proj = sample("main_guard_import")
    r = worst(run_check([py, "train.py"], proj, python=py))
    assert (r.status, r.cause) == (Status.FAIL, causes.MISSING_MODULE)
    assert "drafter_kernels_not_installed_here" in r.summary


def test_a_guard_is_judged_by_its_own_condition(sample) -> None:
    """`ddp = int(os.environ.get('RANK', -1)) != -1` then `if ddp:`: the branch runs only where RANK is set, so
    reading RANK inside it is no finding; an import under a false guard is still tried, and named with its guard."""
    proj = sample("guarded_env")
    results = run_check([PY, "train.py"], proj)
    said = " ".join(r.summary for r in results)
    assert "KeyError" not in said and "os.environ['RANK']" not in said, said
    (w,) = [r for r in results if r.status is Status.WARN]
    assert w.cause == causes.MISSING_MODULE and "under `if wandb_log and ddp_rank == 0` (false here)" in w.summary
    details = " ".join(r.details or "" for r in results)
    assert "`if ddp` is false here" in details, details
    # where the guard holds (RANK set, LOCAL_RANK not): the branch runs, and what it reads must be there
    r = worst(run_check([PY, "train.py"], proj, env={"RANK": "0"}))
    assert r.status is Status.FAIL and "LOCAL_RANK" in r.summary and "reads the environment" in r.summary, r


def test_a_mistyped_script_name_names_the_file_beside_it(tmp_path: Path) -> None:
    """`python mian.py` where main.py is (gat, as a newcomer types it): the file that is there, with the command
    to run it; a name close to none (zzz.py) keeps the plain fix."""
    (tmp_path / "main.py").write_text("print('hi')\n")
    (r,) = run_check([PY, "mian.py", "--epochs", "3"], tmp_path)
    assert r.cause == causes.COMMAND_NOT_FOUND and f"main.py is: run `{PY} main.py --epochs 3` (not tried)" in r.fix, r.fix
    (r,) = run_check([PY, "zzz.py"], tmp_path)
    assert r.cause == causes.COMMAND_NOT_FOUND and "is: run" not in r.fix and "--cwd" in r.fix, r.fix


def test_module_level_code_that_writes_the_users_files_is_stopped_and_said_not_judged(tmp_path):
    """An import runs the project's module-level code: `logging.basicConfig(filename='train.log', filemode='w')` in
    a helper emptied the last run's log during `check`, and a module-level rmtree emptied a folder. The probe
    stops each such write where it is made: the files survive, the import is a warning (not judged), never a
    failure; writing to /dev/null and a library's new cache file still work."""
    cache, project = tmp_path / "cache-elsewhere", tmp_path / "project"
    project.mkdir()
    (project / "train.log").write_text("previous run: step 99000 loss 0.1\n")
    (project / "outputs").mkdir()
    (project / "outputs" / "ckpt.pt").write_text("weights")
    (project / "logsetup.py").write_text(
        "import logging\nlogging.basicConfig(filename='train.log', filemode='w', level=logging.INFO)\n")
    (project / "clean.py").write_text("import shutil\nshutil.rmtree('outputs', ignore_errors=False)\n")
    (project / "quiet.py").write_text(
        f"import os\nNULL = open(os.devnull, 'w')\nos.makedirs({str(cache)!r} + '/x', exist_ok=True)\n"
        f"open({str(cache)!r} + '/x/index.json', 'w').write('{{}}')\n")
    (project / "train.py").write_text("import logsetup\nimport clean\nimport quiet\nprint('training')\n")
    cache.mkdir()  # outside the project: a library's cache folder, where a new file may be made
    results = run_check([PY, "train.py"], project)
    assert (project / "train.log").read_text() == "previous run: step 99000 loss 0.1\n"
    assert (project / "outputs" / "ckpt.pt").read_text() == "weights"
    said = {r.summary.split(" writes ")[0]: r for r in results if r.status == Status.WARN}
    assert set(said) == {"import of logsetup", "import of clean"}, [r.summary for r in results]
    assert f"writes {project / 'train.log'} at logsetup.py:2 (`logging.basicConfig(" in \
        said["import of logsetup"].summary
    assert all(r.status in (Status.OK, Status.WARN) for r in results), [(r.status, r.summary) for r in results]
    assert (cache / "x" / "index.json").exists()  # quiet.py loaded: a new file outside the project is written


GATED = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--wandb", action="store_true", help="log to Weights & Biases")
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
if args.wandb:
    import dfd_gated_logger_not_installed as logger


def main():
    print("training", args.epochs, flush=True)


if __name__ == "__main__":
    main()
"""


def test_an_import_under_an_option_this_launch_does_not_give_is_no_next_step(dfdoctor, tmp_path: Path) -> None:
    """`if args.wandb: import ...` with --wandb not given: the job never imports it, so `check`'s next step is no
    `pip install` (it was); the row names the option that takes the job there, and the install waits for it.
    Given --wandb, the branch runs: the install is the next step again."""
    (tmp_path / "train.py").write_text(GATED)
    quiet = dfdoctor("check", "-q", "--only", "imports.smoke", "--cwd", str(tmp_path), "--", PY, "train.py",
                     "--epochs", "2", cwd=tmp_path)
    assert quiet.returncode == 0 and "next:" not in quiet.stdout and "pip install" not in quiet.stdout, quiet.stdout
    # the further runs through the same entry here (support/in_process)
    doc = json.loads(run_here("check", "--format", "json", "--only", "imports.smoke", "--cwd", str(tmp_path), "--",
                              PY, "train.py", "--epochs", "2", cwd=tmp_path).stdout)
    (rec,) = doc["checks"]
    assert rec["status"] == "warn" and rec["data"]["not_reached"] is True, rec
    assert "imports it only when `args.wandb` holds (train.py:7), which --wandb turns on (train.py:4); this " \
        "launch does not give --wandb, so it does not get there" in rec["summary"], rec["summary"]
    assert rec["fix"].startswith("Nothing to install for this launch. Before you give --wandb: ") and \
        "pip install dfd-gated-logger-not-installed" in rec["fix"], rec["fix"]
    given = run_here("check", "-q", "--only", "imports.smoke", "--cwd", str(tmp_path), "--", PY, "train.py",
                     "--wandb", cwd=tmp_path)
    assert "; next: " in given.stdout and "pip install dfd-gated-logger-not-installed" in given.stdout, given.stdout


GATED_IN_A_FUNCTION = """\
import argparse
import sys
from typing import TYPE_CHECKING

parser = argparse.ArgumentParser()
parser.add_argument("--wandb", action="store_true", help="log to Weights & Biases")
parser.add_argument("--epochs", type=int, default=1)


def main():
    args = parser.parse_args()
    if TYPE_CHECKING:
        import dfd_only_for_the_type_checker
    if sys.version_info < (3, 0):
        import dfd_only_on_python_2
    if args.wandb:
        import dfd_fn_gated_logger_not_installed as logger
        logger.init()
    print("training", args.epochs, flush=True)


if __name__ == "__main__":
    main()
"""


def test_an_import_under_an_if_inside_a_function_is_said_reached_or_not(dfdoctor, tmp_path: Path) -> None:
    """`if args.wandb: import ...` inside main(): imports.smoke said nothing of it at all (round 15); it is
    handled as at module level: not reached where this launch does not give --wandb (no install as the next
    step), the install the next step where it does. What never runs here (TYPE_CHECKING, a branch for
    another Python) is not reported."""
    (tmp_path / "train.py").write_text(GATED_IN_A_FUNCTION)
    doc = json.loads(dfdoctor("check", "--format", "json", "--only", "imports.smoke", "--cwd", str(tmp_path), "--",
                              PY, "train.py", "--epochs", "2", cwd=tmp_path).stdout)
    (rec,) = doc["checks"]
    assert rec["status"] == "warn" and rec["cause"] == "missing-module" and rec["data"]["not_reached"] is True, rec
    assert "No module named 'dfd_fn_gated_logger_not_installed', imported inside a function at " in rec["summary"]
    assert "train.py:17, which the job reaches only when `args.wandb` holds (train.py:16), which --wandb turns on " \
        "(train.py:6): this launch does not give --wandb, so it does not get there" in rec["summary"], rec["summary"]
    assert rec["fix"].startswith("Nothing to install for this launch. Before you give --wandb: "), rec["fix"]
    assert "type_checker" not in json.dumps(doc) and "python_2" not in json.dumps(doc), doc
    given = json.loads(run_here("check", "--format", "json", "--only", "imports.smoke", "--cwd", str(tmp_path),
                                "--", PY, "train.py", "--wandb", cwd=tmp_path).stdout)  # the same entry, here
    (rec,) = given["checks"]
    assert rec["status"] == "warn" and "not_reached" not in rec["data"], rec
    assert rec["summary"].endswith(", and this launch gives --wandb: the job fails when it gets there"), rec
    assert "pip install dfd-fn-gated-logger-not-installed" in rec["fix"] and "Nothing to" not in rec["fix"], rec


MNIST_WITHOUT_ITS_PACKAGE = """\
import argparse
import dfd_torch_not_installed
import dfd_torch_not_installed.nn as nn
from dfd_torch_not_installed import optim
import dfd_torch_not_installed.nn.functional as F
from dfd_vision_not_installed import datasets
import loaders


def main():
    print("training", flush=True)


if __name__ == "__main__":
    main()
"""


def test_one_finding_per_missing_package_naming_every_line_that_imports_it(tmp_path: Path) -> None:
    """An mnist example run where its package is not installed: `import torch`, `import torch.nn`, `from torch
    import optim`... each gave a FAIL row of its own (round 16: 4 rows, 4 times the same install). One finding
    per missing module, naming every line that imports it (a project module's line too, once), one install."""
    (tmp_path / "train.py").write_text(MNIST_WITHOUT_ITS_PACKAGE)
    (tmp_path / "loaders.py").write_text("import dfd_torch_not_installed\n")
    train, loaders = tmp_path / "train.py", tmp_path / "loaders.py"
    results = run_check([PY, "train.py"], tmp_path)
    failed = [r for r in results if r.status is Status.FAIL]
    assert [r.data["missing"] for r in failed] == ["dfd_torch_not_installed", "dfd_vision_not_installed"], \
        [r.summary for r in results]
    torch, vision = failed
    assert torch.summary == (f"No module named 'dfd_torch_not_installed', imported at {train}:2 (also lines 3, 4 and "
                             f"5; {loaders}:1)"), torch.summary
    assert list(torch.evidence) == [f"{train}:2: import dfd_torch_not_installed",
                                    f"{train}:3: import dfd_torch_not_installed.nn as nn",
                                    f"{train}:4: from dfd_torch_not_installed import optim",
                                    f"{train}:5: import dfd_torch_not_installed.nn.functional as F",
                                    f"{loaders}:1: import dfd_torch_not_installed (imported by {train}:7)"]
    assert torch.data["imported_at"] == [f"{train}:{n}" for n in (2, 3, 4, 5)] + [f"{loaders}:1"], torch.data
    assert torch.fix.count("pip install") == 1 and "pip install dfd-torch-not-installed " in torch.fix, torch.fix
    assert vision.summary == f"No module named 'dfd_vision_not_installed', imported at {train}:6", vision.summary
    assert vision.data["imported_at"] == [f"{train}:6"]


CONDITIONAL_AND_LAZY_OF_ONE_PACKAGE = """\
import os

if os.environ.get("DFD_LOG_NOT_SET"):
    import dfd_cond_not_installed
    import dfd_cond_not_installed.sdk as sdk
    from dfd_cond_not_installed import init


def evaluate():
    import dfd_lazy_not_installed
    return dfd_lazy_not_installed


def score():
    from dfd_lazy_not_installed import metrics
    return metrics


if __name__ == "__main__":
    evaluate()
"""


def test_one_warning_per_missing_package_of_conditional_and_lazy_imports_naming_every_line(tmp_path: Path) -> None:
    """Conditional imports (under an `if`) and lazy ones (inside a function) of one missing module: a warning per
    line (round 17: three rows for dfd_cond_not_installed, two for dfd_lazy_not_installed, each its install). One
    per missing module, as for the imports every run meets, naming every line."""
    (tmp_path / "train.py").write_text(CONDITIONAL_AND_LAZY_OF_ONE_PACKAGE)
    train = tmp_path / "train.py"
    warned = [r for r in run_check([PY, "train.py"], tmp_path) if r.status is Status.WARN]
    assert len(warned) == 2, [r.summary for r in warned]
    cond, lazy = warned
    assert cond.cause == lazy.cause == causes.MISSING_MODULE, (cond, lazy)
    assert cond.summary.startswith("conditional import of dfd_cond_not_installed fails (ModuleNotFoundError: No "
                                   f"module named 'dfd_cond_not_installed') at {train}:4 (also lines 5 and 6) "
                                   "under `if os.environ.get"), cond.summary
    assert list(cond.evidence) == [f"{train}:4: import dfd_cond_not_installed",
                                   f"{train}:5: import dfd_cond_not_installed.sdk as sdk",
                                   f"{train}:6: from dfd_cond_not_installed import init"], cond.evidence
    assert cond.data["imported_at"] == [f"{train}:{n}" for n in (4, 5, 6)], cond.data
    assert lazy.summary == (f"No module named 'dfd_lazy_not_installed', imported inside a function at {train}:10 "
                            "(also line 15): the job fails when it gets there"), lazy.summary
    assert list(lazy.evidence) == [f"{train}:10: import dfd_lazy_not_installed",
                                   f"{train}:15: from dfd_lazy_not_installed import metrics"], lazy.evidence
    assert lazy.data["imported_at"] == [f"{train}:10", f"{train}:15"], lazy.data
    assert cond.fix.count("pip install") == lazy.fix.count("pip install") == 1, (cond.fix, lazy.fix)


ONE_PACKAGE_REACHED_ON_ITS_SECOND_LINE = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--wandb", action="store_true")


def main():
    args = parser.parse_args()
    if args.wandb:
        import dfd_two_lines_not_installed
    finish()


def finish():
    import dfd_two_lines_not_installed.sdk


if __name__ == "__main__":
    main()
"""


def test_one_warning_per_missing_package_says_the_line_the_job_reaches(tmp_path: Path) -> None:
    """Two lazy imports of one missing module: the first under `if args.wandb` (not given: never reached), the
    second in a function every run calls. The one warning is in the words of the line the job reaches, never
    "Nothing to install for this launch"."""
    (tmp_path / "train.py").write_text(ONE_PACKAGE_REACHED_ON_ITS_SECOND_LINE)
    train = tmp_path / "train.py"
    (r,) = [r for r in run_check([PY, "train.py"], tmp_path) if r.status is Status.WARN]
    assert r.summary == (f"No module named 'dfd_two_lines_not_installed', imported inside a function at {train}:15 "
                         "(also line 10): the job fails when it gets there"), r.summary
    assert "not_reached" not in r.data and r.data["imported_at"] == [f"{train}:15", f"{train}:10"], r.data
    assert "Nothing to install" not in r.fix and "pip install dfd-two-lines-not-installed" in r.fix, r.fix
