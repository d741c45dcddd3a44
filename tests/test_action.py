"""action.yml, run the way GitHub runs a composite action: each `run:` step in bash with the environment GitHub
gives it (GITHUB_ACTION_PATH, RUNNER_TEMP, GITHUB_PATH, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE, and
the step's `env:` with `${{ inputs.* }}` and `${{ steps.*.outputs.* }}` filled in), PATH extended by what a step
appended to GITHUB_PATH, step outputs read back from GITHUB_OUTPUT. The set-up step really installs this
checkout into a fresh virtual environment (pip given the suite's wheelhouse in place of the package index,
tests/support/wheelhouse.py: the step's lines are run as they are); the upload step (`uses:`) is checked for the
folder it would upload."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support import wheelhouse

ROOT = Path(__file__).resolve().parent.parent
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

pytestmark = pytest.mark.slow


@functools.cache
def action() -> dict:
    """action.yml, read once by the worker that runs these tests: PyYAML is 89 M instructions that every pytest
    process paid when it was read at collection (support/lazy_module.py says why that counts)."""
    import yaml
    return yaml.safe_load((ROOT / "action.yml").read_text())


class Runner:
    """A minimal composite-action runner: enough of GitHub's to run this action's steps as GitHub would."""

    def __init__(self, tmp: Path, workspace: Path):
        self.tmp, self.workspace = tmp, workspace
        self.path_file, self.summary = tmp / "github_path", tmp / "step_summary.md"
        self.path_file.touch()
        self.outputs: dict[str, dict[str, str]] = {}

    def expr(self, text: str, inputs: dict[str, str]) -> str:
        def one(m: re.Match) -> str:
            e = m.group(1)
            if e.startswith("inputs."):
                return inputs[e[len("inputs."):]]
            if e.startswith("steps."):
                _, step, _, key = e.split(".", 3)
                return self.outputs.get(step, {}).get(key, "")
            raise AssertionError(f"expression this test does not evaluate: {e}")
        return _EXPR.sub(one, str(text))

    def env(self, step: dict, inputs: dict[str, str]) -> dict[str, str]:
        extra = [ln for ln in self.path_file.read_text().splitlines() if ln]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "DFDOCTOR_"))}
        env.update(PATH=os.pathsep.join([*reversed(extra), env["PATH"]]), GITHUB_ACTION_PATH=str(ROOT),
                   RUNNER_TEMP=str(self.tmp), GITHUB_PATH=str(self.path_file), GITHUB_WORKSPACE=str(self.workspace),
                   GITHUB_STEP_SUMMARY=str(self.summary), GITHUB_ACTIONS="true", NO_COLOR="1")
        for k, v in (step.get("env") or {}).items():
            env[k] = self.expr(v, inputs)
        return env

    def run(self, given: dict[str, str], *, skip_setup: bool = False) -> dict:
        inputs = {k: str(v.get("default", "")) for k, v in action()["inputs"].items()}
        inputs.update(given)
        logs, uploads, gate = [], [], None
        for step in action()["runs"]["steps"]:
            if skip_setup and step["name"] == "Set up dfdoctor":
                continue
            if "uses" in step:
                assert step["uses"].startswith("actions/upload-artifact@")
                uploads.append(Path(self.workspace, self.expr(step["with"]["path"], inputs)))
                continue
            assert step["shell"] == "bash"
            output = self.tmp / f"output-{step.get('id', 'x')}"
            output.write_text("")
            env = self.env(step, inputs)
            env["GITHUB_OUTPUT"] = str(output)
            p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=self.workspace, env=env, capture_output=True,
                               text=True, timeout=600)
            logs.append(p.stdout + p.stderr)
            if step["name"] == "Gate on the verdict":
                gate = p.returncode
            else:
                assert p.returncode == 0, (step["name"], p.stdout, p.stderr)
            if "id" in step:
                self.outputs[step["id"]] = dict(ln.split("=", 1) for ln in output.read_text().splitlines() if ln)
        return {"logs": logs, "uploads": uploads, "gate": gate, "outputs": self.outputs.get("check", {})}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The set-up step, run once for real: this checkout pip-installed into the action's own venv."""
    tmp = tmp_path_factory.mktemp("runner")
    workspace = tmp / "workspace"
    workspace.mkdir()
    runner = Runner(tmp, workspace)
    step = next(s for s in action()["runs"]["steps"] if s["name"] == "Set up dfdoctor")
    env = runner.env(step, {})
    env["GITHUB_OUTPUT"] = str(tmp / "setup-output")
    # the checkout's dependencies and build backend from the wheelhouse, as tests/test_install_lines.py installs
    # them: asking the index proves nothing of the action. Compiled as pip does by default (not PIP_COMPILE=0):
    # the tests run the installed dfdoctor 7 times, and each run would compile it again (PYTHONDONTWRITEBYTECODE)
    env.update({k: v for k, v in wheelhouse.offline(wheelhouse.wheelhouse(tmp_path_factory)).items()
                if k != "PIP_COMPILE"})
    p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workspace, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "dfdoctor, version" in p.stdout
    bindir = Path(runner.path_file.read_text().split()[0])
    assert sorted(x.name for x in bindir.iterdir()) == ["dfdoctor"]  # its python does not shadow the job's
    return runner


def test_the_action_declares_the_inputs_a_workflow_passes():
    assert action()["runs"]["using"] == "composite"
    assert {"command", "log", "target", "formats"} <= set(action()["inputs"])
    assert action()["inputs"]["command"]["required"] is True
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in action()["runs"]["steps"])


def test_a_failing_launch_annotates_summarises_uploads_and_fails_the_job(installed):
    ws = installed.workspace
    (ws / "train.py").write_text("import json\nimport not_installed_anywhere_ci\n")
    result = installed.run({"command": "python3 train.py --lr 3e-4", "log": "logs/train.log",
                            "formats": "html json sarif gitlab junit",
                            "args": "--only imports.smoke --only log.writable"}, skip_setup=True)
    check_log = result["logs"][0]
    errors = [ln for ln in check_log.splitlines() if ln.startswith("::error ")]
    assert any("file=train.py,line=2" in ln and "missing-module" in ln for ln in errors), check_log
    assert result["outputs"]["verdict"] == "failed" and result["outputs"]["exit-code"] == "1"
    assert result["outputs"]["cause"] in ("missing-module", "log-dir-missing")
    report_dir, = result["uploads"]
    assert sorted(p.name for p in report_dir.iterdir()) == [
        "dfdoctor-junit.xml", "dfdoctor.html", "dfdoctor.json", "dfdoctor.sarif", "gl-code-quality-report.json"]
    assert json.loads((report_dir / "gl-code-quality-report.json").read_text())[0]["check_name"]  # gitlab, not github
    assert json.loads((report_dir / "dfdoctor.sarif").read_text())["version"] == "2.1.0"
    assert "## dfdoctor check: " in installed.summary.read_text()
    assert result["gate"] == 1  # the job fails, after the report was uploaded


def test_a_clean_launch_passes_the_gate(installed):
    ws = installed.workspace
    (ws / "ok.py").write_text("import json\nprint('ok')\n")
    result = installed.run({"command": "python3 ok.py", "args": "--only imports.smoke"}, skip_setup=True)
    assert result["outputs"]["verdict"] == "ok" and result["gate"] == 0
    assert not [ln for ln in result["logs"][0].splitlines() if ln.startswith("::error")]


def test_words_of_the_command_are_never_run_by_the_action(installed):
    """A command input with `$(...)` is split like a shell would, not executed by the action's own shell."""
    marker = installed.tmp / "ran"
    result = installed.run({"command": f"python3 x.py '$(touch {marker})'", "args": "--only imports.smoke"},
                           skip_setup=True)
    assert not marker.exists()
    assert result["outputs"]["exit-code"] == "1"  # x.py does not exist: command-not-found
