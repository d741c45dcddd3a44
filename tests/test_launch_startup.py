"""Issue 45: what `launch --no-check` does before its job starts is only what the start needs. Every check, the
watch's modules and the verdict's were imported first (a launch's whole start-up, 1.5x the job's own time to its
6th line); now they load once the job started. A real launch, its modules listed at the moment of the start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from jobs.harness import kill_runs

# runs `dfdoctor launch ARGS` in this interpreter, noting the modules loaded when the recorder is started
_LAUNCH = """
import json, sys
import dfdoctor.launch.spawn as spawn
start, out = spawn.start, sys.argv[1]
def noted(*a, **k):
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
    return start(*a, **k)
spawn.start = noted
sys.argv = ["dfdoctor"] + sys.argv[2:]
from dfdoctor.cli.main import entry
entry()
"""


def test_launch_no_check_starts_its_job_before_loading_checks_watch_or_verdict(tmp_path: Path):
    seen = tmp_path / "modules.json"
    try:
        p = subprocess.run([sys.executable, "-c", _LAUNCH, str(seen), "launch", "--no-check", "--watch", "0",
                            "--cwd", str(tmp_path), "--format", "json", "--", sys.executable, "-c",
                            "import time; time.sleep(0.5)"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    finally:
        kill_runs(tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout)["verdict"]["state"] == "running", p.stdout + p.stderr
    before = set(json.loads(seen.read_text()))
    assert not [m for m in before if m.startswith("dfdoctor.checks.") and not m.startswith("dfdoctor.checks.probes")]
    for later in ("dfdoctor.launch.orchestrate", "dfdoctor.launch.local", "dfdoctor.diagnose.verdict",
                  "dfdoctor.diagnose.stuck", "dfdoctor.project", "importlib.metadata"):
        assert later not in before, later
