"""A batch script read to its first command (issue 43 item 3): its `cd` targets and venv activations looked at on
a node of the real single-node cluster (tests/infra/slurm.sh) before submission, and its `cd` followed to the
training command."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dfdoctor.slurm import script
from infra.slurm_fixtures import slurm  # noqa: F401

DFDOCTOR = [sys.executable, "-m", "dfdoctor"]


def check(tmp: Path, *args: str) -> tuple[int, dict]:
    out = tmp / f"report-{time.monotonic_ns()}.json"
    p = subprocess.run(DFDOCTOR + ["check", "--format", "json", "--output", str(out), "--", "sbatch", *args],
                       cwd=tmp, capture_output=True, text=True, timeout=300)
    assert out.exists(), p.stderr
    return p.returncode, json.loads(out.read_text())


def job(tmp: Path, body: str) -> Path:
    p = tmp / "job.sbatch"
    p.write_text("#!/bin/bash\n#SBATCH -J steps\n#SBATCH -o %x-%j.out\n" + textwrap.dedent(body))
    return p


def findings(doc: dict, check_id: str) -> list[dict]:
    c = next(c for c in doc["checks"] if c["id"] == check_id)
    return c.get("findings") or [c]


def test_the_steps_before_the_training_command_are_read():
    text = "#!/bin/bash\nset -euo pipefail\nmodule load x\ncd /data/drafter\nsource .venv/bin/activate\n" \
           "srun python train.py\ncd /after\n"
    steps = script.prelude(text)
    assert [(s.number, s.kind, s.path, s.stops) for s in steps] == [(4, "cd", "/data/drafter", True),
                                                                     (5, "activate", ".venv/bin/activate", True)]
    assert script.folder_after(text, "/home/u") == "/data/drafter"
    assert [s.stops for s in script.prelude("cd a\ncd b || exit 1\ncd $X\npython t.py\n")] == [False, True]


def test_a_python_line_inside_if_then_fi_is_the_training_command():
    """A python line under `if …; then …; fi` (one line or several), as an `if`'s condition or in a loop's body is
    still the command the script runs; a `cd` under an `if` is no step the script surely takes."""
    for text, argv in [("if [ -f x ]; then srun python train.py --lr 1; fi\n", ("python", "train.py", "--lr", "1")),
                       ("if srun python3 t.py; then echo ok; fi\n", ("python3", "t.py")),
                       ("if true\nthen python3 t.py\nelse python3 u.py\nfi\n", ("python3", "t.py")),
                       ("for s in 1 2; do torchrun --nproc_per_node 2 t.py --seed $s; done\n",
                        ("torchrun", "--nproc_per_node", "2", "t.py", "--seed", "$s"))]:
        found = script.find("#!/bin/bash\nset -e\n" + text)
        assert found is not None and found.argv == argv and found.guarded, (text, found)
    assert not script.find("if true; then echo; fi\nsrun python3 t.py\n").guarded  # after the block: always runs
    assert script.prelude("if [ -d /scratch ]; then cd /scratch; fi\npython3 t.py\n") == []


@pytest.mark.slow
def test_a_missing_cd_target_is_named_on_the_node_before_submission(slurm, tmp_path):
    s = job(tmp_path, "set -euo pipefail\necho starting\ncd /data/drafter-nowhere\npython3 train.py\n")
    rc, doc = check(tmp_path, str(s))
    (f,) = [f for f in findings(doc, "slurm.output") if f["status"] == "fail"]
    assert rc == 1 and f["cause"] == "input-missing"
    assert f["summary"].startswith(f"job.sbatch line 6: cd /data/drafter-nowhere: no such folder on node {slurm.node}")
    assert "the script stops there" in f["summary"]
    assert doc["verdict"]["cause"] == "input-missing"  # not a misleading `script not found: /tmp/train.py`


@pytest.mark.slow
def test_a_missing_venv_is_named_and_the_cd_is_followed_to_the_script(slurm, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("import nosuch_in_steps_dfd\n")
    s = job(tmp_path, f"cd {work}\nsource .venv/bin/activate\npython3 train.py\n")
    rc, doc = check(tmp_path, str(s))
    (f,) = [f for f in findings(doc, "slurm.output") if f["status"] != "ok"]
    # no `set -e`: the script goes on with the node's python, so this is a warning
    assert f["status"] == "warn" and f["cause"] == "command-not-found"
    assert f"job.sbatch line 5: source .venv/bin/activate: no such file on node {slurm.node}" in f["summary"]
    assert f"python3 -m venv {work}/.venv" in f["fix"]
    imp = next(c for c in doc["checks"] if c["id"] == "imports.smoke")  # train.py found in the cd's folder
    assert rc == 1 and "nosuch_in_steps_dfd" in imp["summary"], imp["summary"]


@pytest.mark.slow
def test_the_launch_verdict_names_the_line_the_script_stopped_at(slurm, tmp_path):
    s = job(tmp_path, "set -euo pipefail\necho starting\ncd /data/drafter-nowhere\npython3 train.py\n")
    out = tmp_path / "launch.json"
    subprocess.run(DFDOCTOR + ["launch", "--no-check", "--watch", "90", "--format", "json", "--output", str(out),
                               "--", "sbatch", str(s)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    v = json.loads(out.read_text())["verdict"]
    assert v["cause"] == "input-missing", v  # not `crashed` with "read the end of the .out file"
    assert v["summary"].startswith(f"job.sbatch line 6: cd /data/drafter-nowhere: no such folder on node {slurm.node}")
    s.write_text(s.read_text().replace("cd /data/drafter-nowhere", "source .venv-nowhere/bin/activate"))
    subprocess.run(DFDOCTOR + ["launch", "--no-check", "--watch", "90", "--format", "json", "--output", str(out),
                               "--", "sbatch", str(s)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    v = json.loads(out.read_text())["verdict"]
    assert v["cause"] == "command-not-found" and "line 6: source .venv-nowhere/bin/activate" in v["summary"], v
