"""Issue 42: where a job runs is one interface. This machine, a --target of any kind, Slurm and Ray are placements
handed to one launch/status/stop pipeline (`dfdoctor.placements`); these tests are about what the pipeline keeps
of a placement between commands. (The commands' own behaviour is the subject of test_launch, test_status,
test_stop, test_remote_launch, test_slurm*, test_ray; the structure is checked in test_structure.)"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from infra.fixtures import infra  # noqa: F401
from jobs.harness import PY, kill_runs, text_of

pytestmark = pytest.mark.slow

FOREVER = "import time\nfor i in range(100000):\n    print('step', i, flush=True)\n    time.sleep(0.3)\n"


@pytest.fixture
def here(tmp_path: Path):
    """dfdoctor's folder (the run's local copy goes under it); every job of its runs killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


def test_a_typed_hops_ssh_options_still_reach_the_target_for_status_and_stop(infra, here, dfdoctor):
    """`launch -- ssh -F FILE host 'python3 job.py'`: the host is known only through the user's -F (no
    DFDOCTOR_SSH_CONFIG). The run's spec keeps those options beside the target's spelling (`ssh://root@host`
    drops them), so `status` and `stop` of the run reach the job where the launch did; they said "Could not
    resolve hostname" and stop left the job running."""
    config = here / "ssh_config"
    shutil.copy(infra.ssh_config, config)
    script = here / "forever.py"
    script.write_text(FOREVER)
    env = {k: v for k, v in os.environ.items() if k != "DFDOCTOR_SSH_CONFIG"}
    env["XDG_CACHE_HOME"] = str(here / "cache")
    p = dfdoctor("launch", "--no-check", "--watch", "4", "--settle", "1", "--format", "json", "--",
                 "ssh", "-F", str(config), "root@dfdoctor-host", f"{PY} -u {script}", cwd=here, env=env,
                 timeout=180)
    rep = json.loads(p.stdout)
    assert rep["verdict"]["state"] == "running", p.stderr + text_of(rep)
    run_id = rep["run"]["id"]
    p = dfdoctor("status", run_id, "--format", "json", cwd=here, env=env, timeout=120)
    again = json.loads(p.stdout)
    assert again["verdict"]["state"] == "running", p.stderr + text_of(again)
    p = dfdoctor("stop", run_id, cwd=here, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "stopped pid" in p.stdout and p.stdout.rstrip().endswith("nothing of the job is left"), p.stdout
