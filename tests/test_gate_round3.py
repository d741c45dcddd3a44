"""Issue 43, what round 2 left: an observed import failure blocks a launch, the Slurm verdict says a typo as the
local gate does, `status` re-reads a job's end, the timeline's precision and its pre-checks' real start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jobs.harness import kill_runs, launch, text_of


@pytest.fixture
def work(tmp_path: Path):
    """A scratch project folder; whatever a run left alive in it is killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


# b. An import failure seen by imports.smoke blocks the launch, as a missing interpreter does.

@pytest.mark.parametrize("lib,said", [
    ("from os import dfd_no_such_name\n", "ImportError"),  # an ImportError raised by the project's own code
    ("CONFIG = {'lr': 0.1}\nBATCH = CONFIG['batch_size']\n", "KeyError"),  # module-level code that raises
], ids=["import-error", "module-level-keyerror"])
def test_an_import_seen_to_fail_blocks_the_launch(work, lib, said):
    (work / "mylib.py").write_text(lib)
    (work / "train.py").write_text("import mylib\nprint('training', flush=True)\n")
    proc, rep = launch(work, sys.executable, "train.py", check=True, extra=("--only", "imports.smoke"))
    v = rep["verdict"]
    assert proc.returncode == 1 and v["state"] == "failed", text_of(rep)
    assert v["summary"].startswith("Not launched: imports.smoke found that the launch cannot work"), v["summary"]
    assert said in text_of(rep) and "mylib.py" in text_of(rep), text_of(rep)
    assert "--force launches anyway" in v["evidence"], v["evidence"]
    assert rep["run"]["pid"] is None and not (work / ".dfdoctor").exists(), "a blocked launch starts nothing"


    # read but not seen to fail: the same import under a condition, and one inside a function, only warn (the
    # branch may never run): the job starts, and the warning stays in the report
    (work / "train.py").write_text("import os\nif os.environ.get('DFD_NEVER_SET'):\n    import mylib\n"
                                   "def later():\n    import dfd_g3_absent\n"
                                   "import time\nfor i in range(40):\n    print('step', i, flush=True)\n"
                                   "    time.sleep(0.5)\n")
    proc, rep = launch(work, sys.executable, "train.py", check=True, watch=15, extra=("--only", "imports.smoke"))
    smoke = next(c for c in rep["checks"] if c["id"] == "imports.smoke")
    assert smoke["status"] == "warn", smoke
    assert rep["run"]["pid"] is not None and not rep["verdict"]["summary"].startswith("Not launched"), text_of(rep)
