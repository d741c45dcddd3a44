"""docs/ci.md's recipes pass on a fresh `git clone` of a healthy sample project (issue 43 item 4).

Each recipe's dfdoctor command is read from the document itself (the plain step, the GitLab script, the action's
`with:` inputs run through action/check.sh as the action's check step runs it), and run in a real clone, with the
test's interpreter as the `python` the workflow set up (it has the sample's requirements, numpy and PyYAML).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "ci.md").read_text()
BIN = Path(sys.executable).parent  # `python` and `dfdoctor` as the workflow's steps find them

pytestmark = pytest.mark.slow

TRAIN = """\
import argparse
import json

import numpy as np
import yaml

p = argparse.ArgumentParser()
p.add_argument("--config", default="configs/small.yaml")
args = p.parse_args()
cfg = yaml.safe_load(open(args.config))
print(json.dumps({"lr": cfg["lr"], "x": float(np.ones(1)[0])}))
"""


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone of a sample project whose log folder, as in real projects, is ignored by git."""
    tmp = tmp_path_factory.mktemp("ci")
    src = tmp / "src"
    (src / "configs").mkdir(parents=True)
    (src / "train.py").write_text(TRAIN)
    (src / "configs" / "small.yaml").write_text("lr: 0.1\n")
    (src / "requirements.txt").write_text("numpy\nPyYAML\n")
    (src / ".gitignore").write_text("logs/\n")
    git = ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "sample"]):
        subprocess.run([*git, *cmd], cwd=src, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", str(src), str(tmp / "clone")], check=True, capture_output=True)
    return tmp / "clone"


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "DFDOCTOR_", "VIRTUAL_ENV"))}
    e.update(PATH=f"{BIN}{os.pathsep}{e['PATH']}", NO_COLOR="1")
    return e


def run(words: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(words, cwd=cwd, env=env(), capture_output=True, text=True, timeout=300)


def test_the_plain_step_passes_on_a_fresh_clone(clone: Path) -> None:
    (line,) = [ln for ln in DOC.splitlines() if ln.strip().startswith("- run: dfdoctor check")]
    words = shlex.split(line.split("- run:", 1)[1])
    assert "--log" not in words
    p = run(words, clone)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "::error" not in p.stdout
    # what the recipe used to pass: `logs/` is not in a checkout, so the gate was red on every run
    p = run([*words[:2], "--log", "logs/train.log", *words[2:]], clone)
    assert p.returncode == 1 and "log-dir-missing" in p.stdout


def test_the_gitlab_script_passes_on_a_fresh_clone(clone: Path) -> None:
    block = DOC.split("## GitLab CI", 1)[1].split("artifacts:", 1)[0]
    script = block[block.index("/tmp/dfdoctor/bin/dfdoctor check"):]
    words = shlex.split(re.sub(r"\s+", " ", script))
    words[0] = "dfdoctor"
    p = run(words, clone)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (clone / "gl-code-quality-report.json").read_text().strip() in ("[]", "[\n]")


def test_the_action_recipe_passes_on_a_fresh_clone(clone: Path, tmp_path: Path) -> None:
    import yaml  # here, not at the top: every pytest process collects this file (test_collection_cost.py)
    workflow = yaml.safe_load(DOC.split("## GitHub Actions", 1)[1].split("```yaml", 1)[1].split("```", 1)[0])
    (step,) = [s for s in workflow["jobs"]["dfdoctor"]["steps"] if "dfdoctor@" in str(s.get("uses"))]
    given = step["with"]
    assert "log" not in given
    out = tmp_path / "github_output"
    e = env()
    e.update({f"INPUT_{k.upper().replace('-', '_')}": str(v) for k, v in given.items()},
             INPUT_OUTPUT_DIR=str(tmp_path / "report"), GITHUB_OUTPUT=str(out), GITHUB_WORKSPACE=str(clone))
    p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(ROOT / "action" / "check.sh")],
                       cwd=clone, env=e, capture_output=True, text=True, timeout=300)
    outputs = dict(ln.split("=", 1) for ln in out.read_text().splitlines() if "=" in ln)
    assert outputs["exit-code"] == "0" and outputs["verdict"] == "ok", p.stdout + p.stderr
