"""The trainer under `dfdoctor launch`: the unguarded race preset's crash is diagnosed as fx-trace-race."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

DFDOCTOR = str(Path(sys.executable).parent / "dfdoctor")


@pytest.mark.slow
def test_launch_then_status_names_the_race(tmp_path: Path) -> None:
    """Launch detached, let it crash, ask `status`: failed, cause fx-trace-race, the guard as the fix. --steps 14:
    every compile, where the race comes, is in the first 7 steps (tests/test_trainer.py's RACE_STEPS says why);
    the preset's 70 kept the drafter that lived training for 56 more steps before the job ended."""
    log = tmp_path / "train.log"
    launched = subprocess.run(
        [DFDOCTOR, "launch", "--cwd", str(tmp_path), "--log", str(log), "--only", "log.*", "--watch", "60",
         "--format", "json", "--output", str(tmp_path / "launch.json"), "--",
         sys.executable, "-m", "dfdoctor.trainer", "--preset", "race", "--no-compile-guard", "--steps", "14",
         "--out", str(tmp_path / "ck")],
        cwd=tmp_path, capture_output=True, text=True, timeout=180)
    report = json.loads((tmp_path / "launch.json").read_text())
    run_id = report["run"]["id"]
    deadline = time.monotonic() + 180
    verdict = report["verdict"]
    while verdict["state"] == "running" and time.monotonic() < deadline:
        time.sleep(3)
        subprocess.run([DFDOCTOR, "status", run_id, "--format", "json", "--output", str(tmp_path / "s.json")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
        verdict = json.loads((tmp_path / "s.json").read_text())["verdict"]
    assert verdict["state"] == "failed", (launched.stdout[-1500:], verdict)
    assert verdict["cause"] == "fx-trace-race"
    assert any("Detected that you are using FX" in e for e in verdict["evidence"])
    assert "Detected that you are using FX" in log.read_text()
