"""A training interpreter older than dfdoctor's: the recorder (it runs under the job's python) and the probes
(they run in the training interpreter) on the real CPython 3.6, 3.7 and 3.8 that pyenv keeps here, and what a
Python too old for the probes gets (2.7): an `error` saying so, never a verdict about the launch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from infra.fixtures import infra  # noqa: F401

pytestmark = pytest.mark.slow

PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
SECRET = "wandb-9f3e2d1c0b4a5968"


def _python(version: str) -> str:
    found = sorted(PYENV.glob(f"{version}.*/bin/python"))
    if not found:
        pytest.skip(f"no CPython {version} under {PYENV}")
    return str(found[-1])


def _env() -> dict:
    return {"WANDB_API_KEY": SECRET, "PYTHONUNBUFFERED": ""}


JOB = ("import os\nfor i in range(5):\n    print('step', i, flush=True)\n"
       "print('key', os.environ.get('WANDB_API_KEY'), flush=True)\n")


@pytest.mark.parametrize("version", ["3.6", "3.7", "3.8"])
def test_launch_under_an_old_python_keeps_the_output_and_masks_the_secret(tmp_path, dfdoctor, version):
    py = _python(version)
    (tmp_path / "job.py").write_text(JOB)
    p = dfdoctor("launch", "--no-check", "--watch", "30", "--log", str(tmp_path / "job.log"), "--format", "json",
                 "--", py, "-u", "job.py", cwd=tmp_path, env=_env())
    rep = json.loads(p.stdout)
    assert p.returncode == 0 and rep["verdict"]["state"] == "ok", rep["verdict"]
    run = Path(rep["run"]["dir"])
    events = [json.loads(line)["event"] for line in (run / "record.jsonl").read_text().splitlines()]
    assert "masking-unavailable" not in events, "the recorder could not load its masking rules"
    assert "step 4" in (run / "stdout.log").read_text(), "the recorder kept no output"
    recorder_said = (run / "recorder.out").read_text() if (run / "recorder.out").exists() else ""
    assert "Warning" not in recorder_said and "Error" not in recorder_said, recorder_said
    kept = {f.name: f.read_text(errors="replace") for f in run.iterdir() if f.is_file()}
    assert not [name for name, text in kept.items() if SECRET in text], "the secret is stored in clear"
    assert "key ***" in kept["stdout.log"]


@pytest.mark.parametrize("version", ["3.6", "3.8"])
def test_checks_in_an_old_training_interpreter_report_only_what_they_saw(tmp_path, dfdoctor, version):
    py = _python(version)
    (tmp_path / "train.py").write_text("import json\nimport os\nprint('train')\n")
    p = dfdoctor("check", "--format", "json", "--", py, "train.py", cwd=tmp_path, env=_env())
    doc = json.loads(p.stdout)
    by_id = {c["id"]: c for c in doc["checks"]}
    assert p.returncode == 0, [(c["id"], c["status"], c["summary"]) for c in doc["checks"]]
    assert by_id["imports.smoke"]["status"] == "ok", by_id["imports.smoke"]
    assert by_id["cuda.init"]["status"] == "skip" and "torch is not installed" in by_id["cuda.init"]["summary"]


def test_a_python_too_old_for_the_probes_is_an_error_not_a_verdict(tmp_path, dfdoctor):
    py = _python("2.7")
    (tmp_path / "train.py").write_text("import json\nprint 'train'\n")
    p = dfdoctor("check", "--format", "json", "--only", "cuda.init", "--only", "imports.smoke", "--", py,
                 "train.py", cwd=tmp_path, env=_env())
    doc = json.loads(p.stdout)
    checks = doc["checks"]
    assert {c["id"]: c["status"] for c in checks} == {"cuda.init": "error", "imports.smoke": "error"}, checks
    # not known to work, not known to fail: still exit 1 under the default --fail-on error, a CI gate holds
    assert p.returncode == 1 and doc["verdict"]["state"] == "unknown", doc["verdict"]
    assert "could not look, and none found a problem" in doc["verdict"]["summary"]
    for c in checks:
        assert c["cause"] is None, c  # not cuda-init-failed: CUDA was never looked at
        assert "cannot run in the training interpreter" in c["summary"] and "Python 3.6" in c["fix"], c


def test_a_target_whose_python_is_too_old_is_an_error_not_a_verdict(tmp_path, dfdoctor, infra):  # noqa: F811
    """Over ssh the bootstrap runs first, in the target's python: it says the version instead of failing."""
    py = _python("2.7")  # the ssh target is this machine, so pyenv's 2.7 is there too
    (tmp_path / "train.py").write_text("import json\n")
    p = dfdoctor("check", "--target", infra.ssh_target, "--python", py, "--format", "json", "--only", "cuda.init",
                 "--", "python", "train.py", cwd=tmp_path, env=infra.env())
    doc = json.loads(p.stdout)
    (c,) = doc["checks"]
    assert c["status"] == "error" and c["cause"] is None, c
    assert "Python 2.7" in c["summary"] and "Python 3.6" in c["fix"], c
    assert p.returncode == 1 and doc["verdict"]["state"] == "unknown"
