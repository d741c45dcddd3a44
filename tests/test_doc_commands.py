"""Every command README.md and docs/*.md show is run here where it can run, as the doc shows it (the test reads
the command out of the doc, so a changed doc line is a changed test).

COVERAGE below is the overview: each command the docs show (tests/support/doc_commands.py reads them out of
the code blocks), and how it is tested:
- `transcript`: a ```console block, run by tests/test_docs.py, its output compared with the doc's;
- `run`: run here as the doc shows it, by the test named; its exit code and the line that says what it did are
  checked (the doc shows no output for it);
- `substituted`: the same, with the test infrastructure's value in place of the user's own (SUBSTITUTES:
  `YOUR_HOST`, `YOUR_PARTITION`, ..., a folder the test made for a path such as /workspace);
- `elsewhere`: run, with what it prints checked, by the test named in another module;
- `not runnable`: why not.
A command added to a doc without a line here fails `test_every_command_in_the_docs_is_in_the_overview`.
`python tests/test_doc_commands.py` prints the counts."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import BIN, REPO
from support.doc_commands import USERS_OWN, DocCommand, commands
from support.torch_imports import torch_cuda
from infra.fixtures import Infra, folder_in_container, infra  # noqa: F401
from infra.slurm_fixtures import Slurm, slurm  # noqa: F401

T = "transcript: tests/test_docs.py"
INSTALL = "elsewhere: tests/test_install_lines.py::test_each_install_line_works_in_a_fresh_venv (then `dfdoctor --version`)"
GIT_INSTALL = INSTALL + " (YOUR_DFDOCTOR_GIT_URL: a git repository of the checkout)"

COVERAGE: dict[str, str] = {
    # README.md: Install, Quick start
    "README.md: pip install .": INSTALL,
    "README.md: pip install -e .": INSTALL,
    "README.md: make dist && pip install dist/*.whl": INSTALL,
    "README.md: pipx install .": INSTALL + " (pipx installed first into that venv)",
    "README.md: make demo": "substituted: test_the_makefiles_demo_launches_the_trainer (docs/trainer.md's copy of the recipe, compared with the Makefile's by test_trainer_md_shows_the_makefiles_demo)",
    "README.md: make test": "not runnable: it is this test suite",
    "README.md: dfdoctor check --log logs/train.log -- python train.py --lr 3e-4": "run: test_a_local_check_launch_and_status",
    "README.md: dfdoctor launch --log logs/train.log -- python -u train.py --lr 3e-4": "run: test_a_local_check_launch_and_status",
    "README.md: dfdoctor status": "run: test_a_local_check_launch_and_status",
    "README.md: dfdoctor stop": "run: test_a_local_check_launch_and_status",
    "README.md: dfdoctor launch --target pct://root@YOUR_HOST/200 --log /workspace/train.log -- python3 -u /workspace/train.py": "substituted: test_launches_and_checks_on_a_pct_container",
    "README.md: dfdoctor check -- sbatch -p YOUR_PARTITION job.sbatch": "substituted: test_an_sbatch_check_launch_and_status",
    "README.md: dfdoctor launch -- sbatch -p YOUR_PARTITION job.sbatch": "substituted: test_an_sbatch_check_launch_and_status",
    "README.md: dfdoctor status slurm:YOUR_JOB_ID": "substituted: test_an_sbatch_check_launch_and_status",
    "README.md: dfdoctor check --slurm-nodes 4 -- python train.py": "run: test_an_sbatch_check_launch_and_status",
    "README.md: dfdoctor env": "run: test_env_prints_the_block",
    "README.md: dfdoctor check --target pct://root@YOUR_HOST/200 --shell-command \"ssh root@YOUR_HOST 'pct exec 200 -- nohup python3 /workspace/t.py > /workspace/t.log 2>&1 &'\" -- python3 /workspace/t.py": "substituted: test_launches_and_checks_on_a_pct_container",
    "README.md: dfdoctor check -- ssh root@YOUR_HOST 'pct exec 200 -- nohup python3 /workspace/t.py > /workspace/t.log 2>&1 &'": "substituted: test_launches_and_checks_on_a_pct_container",
    "README.md: dfdoctor check --log logs/train.log -- python3 train.py": T,
    "README.md: dfdoctor check -q --log logs/train.log -- python3 train.py": T,
    "README.md: mkdir logs && dfdoctor check --format html --output report.html --log logs/train.log -- python3 train.py": T,
    # README.md: Shell completion
    "README.md: eval \"$(_DFDOCTOR_COMPLETE=bash_source dfdoctor)\"": "run: test_shell_completion_as_the_readme_installs_it",
    "README.md: eval \"$(_DFDOCTOR_COMPLETE=zsh_source dfdoctor)\"": "run: test_shell_completion_as_the_readme_installs_it (where zsh is installed; its script is checked by tests/test_docs.py everywhere)",
    "README.md: _DFDOCTOR_COMPLETE=fish_source dfdoctor > ~/.config/fish/completions/dfdoctor.fish": "substituted: test_shell_completion_as_the_readme_installs_it (HOME: a test folder)",
    # docs/ci.md
    "docs/ci.md: dfdoctor check --only imports.smoke --format github -- python3 train.py": T,
    "docs/ci.md: pip install -r requirements.txt": "not runnable: the user's own requirements, a CI step before dfdoctor's",
    "docs/ci.md: pip install \"git+YOUR_DFDOCTOR_GIT_URL\"": GIT_INSTALL,
    "docs/ci.md: dfdoctor check --requirements requirements.txt --skip 'cuda.*' --format github --format html --output dfdoctor.html -- python train.py --config configs/small.yaml": "run: test_the_ci_steps_write_what_the_ci_reads",
    "docs/ci.md: python -m venv /tmp/dfdoctor && /tmp/dfdoctor/bin/pip install \"git+YOUR_DFDOCTOR_GIT_URL\"": GIT_INSTALL + " (/tmp/dfdoctor: a test folder)",
    "docs/ci.md: /tmp/dfdoctor/bin/dfdoctor check --requirements requirements.txt --skip 'cuda.*' --format gitlab --output gl-code-quality-report.json --format junit --output dfdoctor-junit.xml --format html --output dfdoctor.html --format text -- python train.py --config configs/small.yaml": "substituted: test_the_ci_steps_write_what_the_ci_reads (/tmp/dfdoctor/bin: the test's venv)",
    # docs/cuda.md
    "docs/cuda.md: dfdoctor check --only 'cuda*' --require-gpu -- python train.py": "run: test_the_gpu_check_says_what_it_found",
    "docs/cuda.md: .venv/bin/pytest tests/test_cuda*.py -q": "not runnable: it is part of this test suite",
    # docs/launch.md
    "docs/launch.md: dfdoctor launch --log /workspace/train.log -- python train.py --config tiny.yaml": "substituted: test_a_local_check_launch_and_status (/workspace: a test folder)",
    "docs/launch.md: dfdoctor status": "run: test_a_local_check_launch_and_status, test_launches_and_checks_on_a_pct_container",
    "docs/launch.md: dfdoctor status YOUR_RUN_ID": "substituted: test_a_local_check_launch_and_status",
    "docs/launch.md: dfdoctor launch --target pct://root@YOUR_HOST/200 --cwd /workspace --log /workspace/train.log -- python3 train.py": "substituted: test_launches_and_checks_on_a_pct_container",
    # docs/report.md
    "docs/report.md: dfdoctor launch --log logs/train.log --format html --output report.html -- python train.py": "run: test_a_local_check_launch_and_status",
    "docs/report.md: dfdoctor check --format html --output check.html -- python train.py": "run: test_reports_written_and_rendered_again",
    "docs/report.md: dfdoctor report .dfdoctor/runs/YOUR_RUN_ID --format html --output report.html": "substituted: test_a_local_check_launch_and_status",
    "docs/report.md: dfdoctor report result.json --format html --output report.html": "run: test_reports_written_and_rendered_again",
    # docs/slurm.md
    "docs/slurm.md: dfdoctor check -- sbatch job.sbatch": T,
    "docs/slurm.md: salloc -N1 dfdoctor check --slurm-nodes all -- python3 -c 'import nosuch_x'": T,
    "docs/slurm.md: DFDOCTOR_NCCL_BACKEND=gloo dfdoctor check --slurm-nodes 2 --only cuda.nccl -- python -c pass": "elsewhere: tests/test_slurm_nodes.py::test_nccl_over_the_nodes_blames_the_node_with_a_wrong_interface (the two-node cluster with GLOO_SOCKET_IFNAME=ib7 on n2; the culprit, the waiter and the fix are checked, not the doc's text)",
    "docs/slurm.md: dfdoctor launch -- sbatch --array=0-3 arr.sh": T,
    "docs/slurm.md: DFDOCTOR_NCCL_BACKEND=gloo dfdoctor check --slurm-nodes 2 --timeout 20 --only cuda.nccl -- python -c pass": "elsewhere: tests/test_slurm_nodes.py::test_nccl_names_the_node_that_cannot_reach_rank_0s_store (n2 cut off from n1; --timeout 40 for a loaded host)",
    "docs/slurm.md: dfdoctor launch -- sbatch -o o-%j.log job.sbatch": "elsewhere: tests/test_slurm_stuck.py::test_a_batch_python_without_u_that_works_is_output_buffered_then_status_says_so_again",
    "docs/slurm.md: dfdoctor launch -- sbatch job.sbatch": T,
    # docs/targets.md
    "docs/targets.md: dfdoctor check --target ssh://YOUR_HOST --target ssh://YOUR_OTHER_HOST --target docker://YOUR_CONTAINER -- python3 train.py": "substituted: test_many_targets_at_once",
    "docs/targets.md: dfdoctor check --targets-file fleet.txt --parallel 8 --format html --output fleet.html -- python3 train.py": "substituted: test_many_targets_at_once (fleet.txt: the same three targets)",
    "docs/targets.md: dfdoctor check --only launch.path --shell-command \"ssh root@HOST 'pct exec 200 -- nohup python /workspace/train.py > /workspace/train.log 2>&1 &'\"": "elsewhere: tests/test_rehearse.py::test_docs_show_the_seed_lines_real_output (the whole block compared; DFDOCTOR_REGEN_DOCS=1 rewrites it)",
    # docs/trainer.md
    "docs/trainer.md: python -m dfdoctor.trainer --help": "run: test_the_trainers_help",
    "docs/trainer.md: python -m dfdoctor.trainer": "elsewhere: tests/test_trainer.py::test_compiled_guarded_run_trains (the same config, --steps 20 and one length bucket, --seq-lens 32, to keep it short)",
    "docs/trainer.md: python -m dfdoctor.trainer --preset gpu": "not runnable: needs a CUDA GPU (bench/gpu_trainer.sh runs it on the device)",
    "docs/trainer.md: python -m dfdoctor.trainer --no-compile-guard": "not runnable: what it does depends on the machine (GPU: hangs; CPU: docs/trainer.md); its failure is tested with --preset race by tests/test_trainer.py",
    "docs/trainer.md: python -m dfdoctor.trainer --preset race --no-compile-guard": "elsewhere: tests/test_trainer.py::test_race_preset_crashes_without_the_guard_and_trains_with_it (the same preset, --steps 3 --target-steps 1: its drafters die at their first recompile, step 2)",
    "docs/trainer.md: trainer/launch.sh [options]": "elsewhere: tests/test_trainer.py::test_launcher_script_passes_arguments ([options]: --help)",
    "docs/trainer.md: mkdir -p out/demo": "substituted: test_the_makefiles_demo_launches_the_trainer (out/: a test folder)",
    "docs/trainer.md: .venv/bin/dfdoctor launch --log out/demo/train.log --watch 120 --format text --format json --output out/launch.json --format html --output out/launch.html -- .venv/bin/python -u -m dfdoctor.trainer --preset tiny --target-steps 3000 --out out/demo/ckpt": "substituted: test_the_makefiles_demo_launches_the_trainer (.venv/bin: the test's venv; out/: a test folder)",
}
KINDS = ("transcript", "run", "substituted", "elsewhere", "not runnable")


def listed() -> list[DocCommand]:
    """The commands the overview lists: every command outside a transcript, and a transcript's dfdoctor
    commands (its other steps, `printf ... > train.py`, make the files it needs and run with it)."""
    return [c for c in commands() if not c.transcript or "dfdoctor " in c.text]


def shown(key: str) -> str:
    """The command as the doc shows it now (the overview names it; it must still be there)."""
    for c in commands():
        if c.key == key:
            return c.text
    raise AssertionError(f"the docs no longer show `{key}`: update COVERAGE")


@dataclass
class Ran:
    rc: int
    out: str

    def has(self, pattern: str) -> bool:
        return re.search(pattern, self.out, re.M) is not None


def run_shown(key: str, cwd: Path, env: dict | None = None, subst: dict | None = None, timeout: float = 300) -> Ran:
    """Run the doc's command with bash in `cwd`, the test venv first on PATH; `subst`: the user's own values
    replaced by the test infrastructure's (every YOUR_ word must get one)."""
    command = shown(key)
    for mine, here in (subst or {}).items():
        assert mine in command, f"`{mine}` is not in `{command}`"
        command = command.replace(mine, here)
    assert not USERS_OWN.search(command), f"no value for {USERS_OWN.search(command).group()} in `{command}`"
    full = {**os.environ, **(env or {}), "COLUMNS": "100", "NO_COLOR": "1"}
    full["PATH"] = f"{BIN}{os.pathsep}{full.get('PATH', '')}"
    full.pop("FORCE_COLOR", None)
    p = subprocess.run(["bash", "-c", command], cwd=cwd, env=full, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return Ran(p.returncode, p.stdout)


def expect(ran: Ran, rc: int, *patterns: str) -> None:
    assert ran.rc == rc, f"exit {ran.rc}, not {rc}:\n{ran.out}"
    for pattern in patterns:
        assert ran.has(pattern), f"no line matches {pattern!r}:\n{ran.out}"


def run_id(ran: Ran) -> str:
    m = re.search(r"^  run: .*/\.dfdoctor/runs/([\w-]+)$", ran.out, re.M)
    assert m, ran.out
    return m.group(1)


def stop_local_job(ran: Ran) -> None:
    """Kill the job a local launch started (it runs in a process group of its own; the recorder then ends)."""
    m = re.search(r"\(pid (\d+)\)", ran.out)
    if m:
        try:
            os.killpg(int(m.group(1)), signal.SIGKILL)
        except ProcessLookupError:
            pass


# A job that prints every half second for a minute at most (a backstop: each test also kills it)
TICKING = ("import argparse, time\np = argparse.ArgumentParser(); p.add_argument('--lr'); p.add_argument('--config')\n"
           "p.parse_args()\nfor i in range(120):\n    print('step', i, flush=True)\n    time.sleep(0.5)\n")


# --- the overview ---------------------------------------------------------------------------------------------

def test_every_command_in_the_docs_is_in_the_overview():
    keys = {c.key for c in listed()}
    missing = sorted(keys - COVERAGE.keys())
    stale = sorted(COVERAGE.keys() - keys)
    assert not missing, "commands the docs show that COVERAGE does not list:\n" + "\n".join(missing)
    assert not stale, "COVERAGE lists commands the docs no longer show:\n" + "\n".join(stale)
    for key, how in COVERAGE.items():
        assert how.split(":")[0] in KINDS, (key, how)


def test_the_overview_names_tests_that_exist():
    here = globals()
    for key, how in COVERAGE.items():
        kind, _, rest = how.partition(": ")
        if kind in ("run", "substituted"):
            for name in re.findall(r"\btest_\w+", rest.split(" (")[0]):
                assert name in here, f"{key}: no {name} in this module"
        elif kind == "elsewhere":
            path, _, name = rest.split(" ")[0].partition("::")
            assert f"def {name}(" in (REPO / path).read_text(), f"{key}: no {name} in {path}"


def test_a_block_with_prompts_is_compared_or_compared_elsewhere():
    """A `$ ` transcript outside a ```console block is not compared by tests/test_docs.py: only where another
    test compares it (docs/targets.md's seed block, written by tests/test_rehearse.py)."""
    for c in listed():
        if c.transcript and not c.compared:
            assert COVERAGE[c.key].startswith("elsewhere"), f"{c.doc}:{c.line}: make it a ```console block"


def test_the_overview_counts():
    counts = summary()
    assert counts["run"] + counts["substituted"] + counts["transcript"] >= 30, counts


def summary() -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for c in listed():
        counts[COVERAGE[c.key].split(":")[0]] += 1
    return counts


def test_trainer_md_shows_the_makefiles_demo():
    recipe = (REPO / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    lines = [x.strip() for x in recipe.replace("\\\n", " ").splitlines()[1:] if not x.strip().startswith("@")]
    made = [" ".join(x.replace("$(BIN)", ".venv/bin").replace("$(OUT)", "out").split()) for x in lines]
    doc = [c.text for c in commands() if c.doc == "docs/trainer.md" and c.text.split()[0] in ("mkdir", ".venv/bin/dfdoctor")]
    assert made == [" ".join(x.split()) for x in doc], (made, doc)


# --- local ----------------------------------------------------------------------------------------------------

def test_env_prints_the_block(tmp_path):
    ran = run_shown("README.md: dfdoctor env", tmp_path)
    expect(ran, 0, r"^dfdoctor: +\S+ \(its own Python", r"^training interpreter: ", r"^torch: ", r"^GPUs: ")


def test_the_trainers_help(tmp_path):
    ran = run_shown("docs/trainer.md: python -m dfdoctor.trainer --help", tmp_path)
    expect(ran, 0, r"--preset", r"--no-compile-guard")


def test_shell_completion_as_the_readme_installs_it(tmp_path):
    bash = shown('README.md: eval "$(_DFDOCTOR_COMPLETE=bash_source dfdoctor)"')
    ran = run_shown('README.md: eval "$(_DFDOCTOR_COMPLETE=bash_source dfdoctor)"', tmp_path)
    expect(ran, 0)
    # what ~/.bashrc then gives: the completion is registered, and it completes
    p = subprocess.run(["bash", "-c", f"{bash}\ncomplete -p dfdoctor"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert p.returncode == 0 and "_dfdoctor_completion" in p.stdout, p.stdout + p.stderr
    (tmp_path / ".config/fish/completions").mkdir(parents=True)  # fish's own folder, made by fish itself
    ran = run_shown("README.md: _DFDOCTOR_COMPLETE=fish_source dfdoctor > ~/.config/fish/completions/dfdoctor.fish",
                    tmp_path, env={"HOME": str(tmp_path)})
    expect(ran, 0)
    assert "complete" in (tmp_path / ".config/fish/completions/dfdoctor.fish").read_text()
    zsh = subprocess.run(["which", "zsh"], capture_output=True).returncode == 0
    if zsh:
        ran = run_shown('README.md: eval "$(_DFDOCTOR_COMPLETE=zsh_source dfdoctor)"', tmp_path)
        expect(ran, 0)


def test_the_gpu_check_says_what_it_found(tmp_path):
    (tmp_path / "train.py").write_text("print('step 1')\n")
    ran = run_shown("docs/cuda.md: dfdoctor check --only 'cuda*' --require-gpu -- python train.py", tmp_path,
                    timeout=180)
    cuda_build = torch_cuda()  # BIN's python is this one
    if not cuda_build:  # the test machines' torch is a CPU build: a GPU that --require-gpu wants is missing
        expect(ran, 1, r"^dfdoctor check: FAILED \[cuda-unavailable\]$", r"CPU-only build")
    else:
        assert ran.has(r"^dfdoctor check: (OK|FAILED \[cuda-)"), ran.out


def test_the_ci_steps_write_what_the_ci_reads(tmp_path):
    (tmp_path / "train.py").write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--config')\n"
                                       "open(p.parse_args().config).read()\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "small.yaml").write_text("lr: 1\n")
    (tmp_path / "requirements.txt").write_text("")
    summary_file = tmp_path / "step-summary.md"
    ran = run_shown("docs/ci.md: dfdoctor check --requirements requirements.txt --skip 'cuda.*' --format github "
                    "--format html --output dfdoctor.html -- python train.py --config configs/small.yaml", tmp_path,
                    env={"GITHUB_STEP_SUMMARY": str(summary_file)}, timeout=180)
    expect(ran, 0, r"^dfdoctor check: OK")
    assert "<html" in (tmp_path / "dfdoctor.html").read_text()[:500].lower()
    assert "dfdoctor" in summary_file.read_text()
    gitlab = ("docs/ci.md: /tmp/dfdoctor/bin/dfdoctor check --requirements requirements.txt --skip 'cuda.*' "
              "--format gitlab --output gl-code-quality-report.json --format junit --output dfdoctor-junit.xml "
              "--format html --output dfdoctor.html --format text -- python train.py --config configs/small.yaml")
    (tmp_path / "train.py").write_text("import wandb\n")  # a finding, so the code-quality report says something
    ran = run_shown(gitlab, tmp_path, subst={"/tmp/dfdoctor/bin/": f"{BIN}/"}, timeout=180)
    expect(ran, 1, r"^dfdoctor check: FAILED \[missing-module\]", r"^FAIL +pre +imports\.smoke ")
    issues = json.loads((tmp_path / "gl-code-quality-report.json").read_text())
    assert any(i["location"]["path"] == "train.py" for i in issues), issues
    assert "<testsuite" in (tmp_path / "dfdoctor-junit.xml").read_text()


def test_reports_written_and_rendered_again(tmp_path):
    (tmp_path / "train.py").write_text("print('step 1')\n")
    ran = run_shown("docs/report.md: dfdoctor check --format html --output check.html -- python train.py", tmp_path)
    expect(ran, 0, r"^dfdoctor check: OK.*\(check\.html\)$")
    assert "dfdoctor" in (tmp_path / "check.html").read_text()
    # result.json: what `--format json` wrote (the doc's own words for it)
    p = subprocess.run([str(BIN / "dfdoctor"), "check", "--format", "json", "--output", "result.json", "--",
                        "python", "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ran = run_shown("docs/report.md: dfdoctor report result.json --format html --output report.html", tmp_path)
    expect(ran, 0, r"\(report\.html\)$")
    assert "train.py" in (tmp_path / "report.html").read_text()


@pytest.mark.slow
def test_a_local_check_launch_and_status(tmp_path):
    here, elsewhere, workspace = tmp_path / "here", tmp_path / "elsewhere", tmp_path / "workspace"
    for d in (here / "logs", elsewhere, workspace):
        d.mkdir(parents=True)
    (here / "train.py").write_text(TICKING)
    launched: list[Ran] = []
    try:
        ran = run_shown("README.md: dfdoctor check --log logs/train.log -- python train.py --lr 3e-4", here)
        expect(ran, 0, r"^dfdoctor check: OK$", r"^ok +pre +imports\.smoke ")
        assert not (here / "logs/train.log").exists()  # "pre-launch checks, nothing started"
        ran = run_shown("README.md: dfdoctor launch --log logs/train.log -- python -u train.py --lr 3e-4", here)
        launched.append(ran)
        expect(ran, 0, r"^dfdoctor launch: RUNNING$", r"its log is growing")
        first = run_id(ran)
        assert "step" in (here / "logs/train.log").read_text()
        ran = run_shown("README.md: dfdoctor status", elsewhere)  # "later, from any folder"
        expect(ran, 0, r"^dfdoctor status: RUNNING$", rf"runs/{first}$")

        # docs/launch.md's, with /workspace a folder of the test's
        ran = run_shown("docs/launch.md: dfdoctor launch --log /workspace/train.log -- python train.py --config tiny.yaml",
                        here, subst={"/workspace": str(workspace)})
        launched.append(ran)
        expect(ran, 0, r"^dfdoctor launch: RUNNING$")
        second = run_id(ran)
        assert "step" in (workspace / "train.log").read_text()
        ran = run_shown("docs/launch.md: dfdoctor status", here)  # the latest run
        expect(ran, 0, r"^dfdoctor status: ", rf"runs/{second}$")
        ran = run_shown("docs/launch.md: dfdoctor status YOUR_RUN_ID", elsewhere, subst={"YOUR_RUN_ID": first[:15]})
        expect(ran, 0, r"^dfdoctor status: RUNNING$", rf"runs/{first}$")

        # docs/report.md's: a launch with its HTML report, and that report rendered again from the run folder
        ran = run_shown("docs/report.md: dfdoctor launch --log logs/train.log --format html --output report.html -- "
                        "python train.py", here)
        launched.append(ran)
        expect(ran, 0, r"^dfdoctor launch: RUNNING: .*\(report\.html\)$")
        (here / "report.html").unlink()
        latest = sorted(p.name for p in (here / ".dfdoctor/runs").iterdir())[-1]
        ran = run_shown("docs/report.md: dfdoctor report .dfdoctor/runs/YOUR_RUN_ID --format html --output report.html",
                        here, subst={"YOUR_RUN_ID": latest})
        expect(ran, 0, r"\(report\.html\)$")
        assert "train.py" in (here / "report.html").read_text()

        # README's stop: the latest run's job ends, and its status says who stopped it
        ran = run_shown("README.md: dfdoctor stop", here)
        expect(ran, 0, rf"^dfdoctor stop: run {latest} \(the latest run launched from {re.escape(str(here))}\)$",
               r"^stopped pid \d+ \(SIGTERM\): .*train\.py$",
               r"^nothing of the job is left$")
        expect(run_shown("docs/launch.md: dfdoctor status", here), 0, r"^dfdoctor status: OK \[stopped-by-user\]$")
    finally:
        for ran in launched:
            stop_local_job(ran)


@pytest.mark.slow
def test_the_makefiles_demo_launches_the_trainer(tmp_path):
    """`make demo`, as docs/trainer.md shows its recipe: the bundled trainer under launch (compile.race proves the
    guard first) is `ok` when it ends within the watch (a warm compile cache, a quiet machine: ~17 s) and
    `running` otherwise, and its reports are written. (Which of its phases hold "running" back depends on their
    pace, so on load: tests/test_stuck.py and tests/test_loop_lines.py test those rules.)"""
    expect(run_shown("docs/trainer.md: mkdir -p out/demo", tmp_path), 0)
    ran = run_shown("docs/trainer.md: .venv/bin/dfdoctor launch --log out/demo/train.log --watch 120 --format text "
                    "--format json --output out/launch.json --format html --output out/launch.html -- "
                    ".venv/bin/python -u -m dfdoctor.trainer --preset tiny --target-steps 3000 --out out/demo/ckpt",
                    tmp_path, subst={".venv/bin/": f"{BIN}/"}, timeout=500)
    try:
        expect(ran, 0, r"^dfdoctor launch: (OK|RUNNING)$", r"^ok +pre +compile\.race ")
        assert json.loads((tmp_path / "out/launch.json").read_text())["verdict"]["state"] in ("ok", "running")
        assert "dfdoctor.trainer" in (tmp_path / "out/launch.html").read_text()
    finally:
        stop_local_job(ran)


# --- targets: the pct container, ssh, docker --------------------------------------------------------------------

@pytest.mark.slow
def test_launches_and_checks_on_a_pct_container(infra: Infra, tmp_path):
    host = {"YOUR_HOST": "dfdoctor-host"}  # the ssh_config's name for the test sshd (DFDOCTOR_SSH_CONFIG)
    with folder_in_container(infra, tmp_path, "docs-") as box:
        (box.host_side / "train.py").write_text(TICKING)
        mine = {**host, "/workspace": box.inside}  # a fresh folder in container 200 for the doc's /workspace
        ran = run_shown("README.md: dfdoctor launch --target pct://root@YOUR_HOST/200 --log /workspace/train.log -- "
                        "python3 -u /workspace/train.py", box.local, env=box.env, subst=mine)
        expect(ran, 0, r"^dfdoctor launch: RUNNING$", r"^ok +pre +target\.reachable +container 200 on root@dfdoctor-host")
        assert "step" in (box.host_side / "train.log").read_text()
        (box.host_side / "train.log").unlink()
        ran = run_shown("docs/launch.md: dfdoctor launch --target pct://root@YOUR_HOST/200 --cwd /workspace --log "
                        "/workspace/train.log -- python3 train.py", box.local, env=box.env, subst=mine)
        expect(ran, 0, r"^dfdoctor launch: RUNNING$")
        latest = run_id(ran)
        ran = run_shown("docs/launch.md: dfdoctor status", box.local, env=box.env)  # "from the same local folder"
        expect(ran, 0, r"^dfdoctor status: RUNNING$", rf"runs/{latest}$", r"^ok +post +target\.reachable ")
        # the jobs are killed by folder_in_container, which fails the test if one is left

    # the seed's line, as typed and after `--`: /workspace is on the container, the redirect opens on the host
    for key in ("README.md: dfdoctor check --target pct://root@YOUR_HOST/200 --shell-command \"ssh root@YOUR_HOST "
                "'pct exec 200 -- nohup python3 /workspace/t.py > /workspace/t.log 2>&1 &'\" -- python3 /workspace/t.py",
                "README.md: dfdoctor check -- ssh root@YOUR_HOST 'pct exec 200 -- nohup python3 /workspace/t.py > "
                "/workspace/t.log 2>&1 &'"):
        ran = run_shown(key, tmp_path, env=infra.env(), subst=host)
        expect(ran, 1, r"^dfdoctor check: FAILED \[log-dir-missing\]$",
               r"^  The shell on dfdoctor-host could not open the log /workspace/t\.log",
               r"^FAIL +pre +launch\.path +the shell on dfdoctor-host")


@pytest.mark.slow
def test_many_targets_at_once(infra: Infra, tmp_path):
    if not infra.docker_name:
        pytest.skip(f"no docker container: {infra.docker_problem}")
    mine = {"YOUR_HOST": "dfdoctor-host", "YOUR_OTHER_HOST": f"root@127.0.0.1:{infra.port}",
            "YOUR_CONTAINER": infra.docker_name}
    targets = ["ssh://dfdoctor-host", f"ssh://root@127.0.0.1:{infra.port}", f"docker://{infra.docker_name}"]
    key = ("docs/targets.md: dfdoctor check --target ssh://YOUR_HOST --target ssh://YOUR_OTHER_HOST --target "
           "docker://YOUR_CONTAINER -- python3 train.py")
    ran = run_shown(key, tmp_path, env=infra.env(), subst=mine)
    # train.py is the user's: on no target here (the job starts in the target user's home), so every row fails
    # on it, and says so, one row per target
    expect(ran, 1, r"^dfdoctor check: FAILED \[command-not-found\]$", r"^targets:$",
           *(rf"^  FAILED +{re.escape(t)} " for t in targets))
    (tmp_path / "fleet.txt").write_text("# the same three\n" + "\n".join(targets) + "\n")
    ran = run_shown("docs/targets.md: dfdoctor check --targets-file fleet.txt --parallel 8 --format html --output "
                    "fleet.html -- python3 train.py", tmp_path, env=infra.env())
    expect(ran, 1, r"^dfdoctor check: FAILED \[command-not-found\].*\(fleet\.html\)$")
    page = (tmp_path / "fleet.html").read_text()
    assert all(t in page for t in targets)


# --- Slurm ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_an_sbatch_check_launch_and_status(slurm: Slurm, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --output=logs/train-%j.out\n"
                                         "python3 train.py\n")
    (tmp_path / "train.py").write_text("print('step 1', flush=True)\n")
    part = {"YOUR_PARTITION": slurm.partition}
    ran = run_shown("README.md: dfdoctor check -- sbatch -p YOUR_PARTITION job.sbatch", tmp_path, subst=part)
    expect(ran, 0, r"^dfdoctor check: OK$", rf"^ok +pre +slurm\.partition +Partition {slurm.partition} can run it")
    ran = run_shown("README.md: dfdoctor launch -- sbatch -p YOUR_PARTITION job.sbatch", tmp_path, subst=part)
    expect(ran, 0, r"^dfdoctor launch: OK$", r"^  Job \d+ completed with exit 0")
    job = re.search(r"^  Job (\d+) completed", ran.out, re.M).group(1)
    ran = run_shown("README.md: dfdoctor status slurm:YOUR_JOB_ID", tmp_path, subst={"YOUR_JOB_ID": job})
    expect(ran, 0, rf"^  Job {job} completed with exit 0", rf"job {job} \(train\): COMPLETED")
    # 4 nodes of a one-node cluster: said at once, with the numbers and the fix, never a wait
    start = time.monotonic()
    ran = run_shown("README.md: dfdoctor check --slurm-nodes 4 -- python train.py", tmp_path)
    expect(ran, 1, r"^dfdoctor check: FAILED \[never-starts\]$", r"Slurm can never give 4 node\(s\) at once",
           r"--slurm-nodes 1")
    assert time.monotonic() - start < 30


if __name__ == "__main__":
    for kind, n in summary().items():
        print(f"{kind:13} {n}")
    for c in listed():
        how = COVERAGE[c.key]
        if how.startswith("not runnable"):
            print(f"  {c.doc}:{c.line} {c.text[:70]}: {how.split(': ', 1)[1]}")
