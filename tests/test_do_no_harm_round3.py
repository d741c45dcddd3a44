"""Round 3 of the hostile review, the small findings: what dfdoctor prints of the user's input stays one safe
line (no newline or ESC from an environment variable, no password from an argument)."""

from __future__ import annotations

import sys

from conftest import run_dfdoctor


def test_env_prints_cuda_visible_devices_on_one_line_with_its_control_characters_escaped(tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('no torch here')\n")
    res = run_dfdoctor("env", "--python", sys.executable, cwd=tmp_path,
                       env={"PYTHONPATH": str(fake.parent), "CUDA_VISIBLE_DEVICES": "0\n\x1b[2Jfake: line"})
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("CUDA_VISIBLE_DEVICES:"))
    assert line.endswith(" 0\\x0a\\x1b[2Jfake: line"), res.stdout
    assert "\x1b" not in res.stdout and not any(ln.startswith("fake:") for ln in res.stdout.splitlines())


def test_a_password_in_an_argument_is_masked_in_the_usage_error(tmp_path):
    res = run_dfdoctor("check", "--python", "postgres://u:hunter2pw@db/x", "--", "python3", "x.py", cwd=tmp_path)
    assert res.returncode == 2
    assert "hunter2pw" not in res.stderr and "--python postgres://u:***@db/x" in res.stderr, res.stderr
