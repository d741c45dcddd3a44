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
    """Launch detached, let it crash, ask `status`: failed, cause fx-trace-race, the guard as the fix. --steps 3:
    the race comes at a drafter's first recompile (its second bucket, step 2: 16 of 16 runs crashed at --steps 2
    here, 2 or 3 of 4 drafters dead, two runs at once on the 2 cores); the third step is a second recompile, for
    margin. --steps 14 (every bucket compiled, then run again) kept the drafter that lived compiling and training
    for 11 more steps before the job ended, ~3 CPU-s; the target's 20 pretraining steps (--target-steps 1) matter
    to no drafter's compile."""
    log = tmp_path / "train.log"
    launched = subprocess.run(
        [DFDOCTOR, "launch", "--cwd", str(tmp_path), "--log", str(log), "--only", "log.*", "--watch", "60",
         "--format", "json", "--output", str(tmp_path / "launch.json"), "--",
         sys.executable, "-m", "dfdoctor.trainer", "--preset", "race", "--no-compile-guard", "--steps", "3",
         "--target-steps", "1", "--out", str(tmp_path / "ck")],
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
