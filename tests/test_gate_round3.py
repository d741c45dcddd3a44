"""Issue 43, what round 2 left: `status` re-reads a DDP job's end (a), an observed import failure blocks a launch
(b), the timeline's one precision and its pre-checks' real start (c), args.paths fails on a read proved to run (d),
dependency-mismatch only where a pin establishes it (e), the Slurm verdict says a typo as the local gate does (f)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import run_dfdoctor
from infra.slurm_fixtures import slurm  # noqa: F401
from jobs.harness import kill_runs, launch, status, text_of, wait_for
from support.in_process import run_here
from test_slurm import job_script, launch as slurm_launch


@pytest.fixture
def work(tmp_path: Path):
    """A scratch project folder; whatever a run left alive in it is killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


# b. An import failure seen by imports.smoke blocks the launch, as a missing interpreter does.

@pytest.mark.slow
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


# c. One precision in the timeline (JSON and HTML), and the pre-launch checks where they began.

@pytest.mark.slow
def test_the_timeline_has_one_precision_and_its_pre_checks_where_they_began(work):
    (work / "train.py").write_text("print('trained', flush=True)\n")
    html = work / "report.html"
    proc, rep = launch(work, sys.executable, "train.py", check=True, watch=15,
                       extra=("--only", "imports.smoke", "--format", "html", "--output", str(html)))
    timeline = rep["timeline"]
    assert all(round(e["t"], 3) == e["t"] for e in timeline), [e["t"] for e in timeline]
    pre = next(e for e in timeline if e["event"] == "pre-checks")
    smoke = next(c for c in rep["checks"] if c["id"] == "imports.smoke")
    first_of_job = min(e["t"] for e in timeline if e["event"] not in ("pre-checks",))
    # stamped when they began: the checks' own time fits between that stamp and the job's first event
    assert pre["t"] + smoke["duration_s"] <= first_of_job + 0.01, (pre, smoke["duration_s"], timeline)
    took = re.search(r"in (\d+\.\d{3}) s$", pre["detail"])
    assert took and float(took[1]) >= smoke["duration_s"] - 0.01, pre
    offsets = re.findall(r'<span class="t">([^<]*)</span>', html.read_text())
    assert offsets and all(re.fullmatch(r"\+\d+\.\d{3} s|\+\d+ min \d\d\.\d{3} s", o) for o in offsets), offsets


# a. `status` while a DDP job's ranks end one after another: the end is read again before `unknown`.

_DDP_ENDING = """import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
for i in range(3):
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"rank {r} step {i}", flush=True)
    time.sleep(0.3)
dist.destroy_process_group()
time.sleep(0.2 + 9 * (1 - r))  # rank 1 leaves first; rank 0 saves its checkpoint last
print(f"rank {r} done", flush=True)
"""


@pytest.mark.slow
def test_status_while_a_ddp_jobs_ranks_end_one_after_another_never_guesses(work):
    """Rank 1 had left (its process group destroyed, so no connection to the store) while rank 0 finished: status
    said `unknown` (1 of 2 ranks alive) or, worse, `rank-missing` (rank 0 "never joined"), about a job that
    ended 0 seconds later. Each status in that window says the job runs, or that it ended once it did; `unknown`
    only after reading the end again."""
    (work / "train.py").write_text(_DDP_ENDING)
    launch(work, sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "train.py",
           watch=0)
    log = work / "train.log"
    assert wait_for(lambda: log.exists() and "rank 1 done" in log.read_text(), 120), \
        log.read_text() if log.exists() else "no log"
    said = []
    while "rank 0 done" not in log.read_text() or not said:
        proc, rep = status(work)
        v = rep["verdict"]
        said.append(f"{v['state']} [{v['cause']}]: {v['summary']}")
        assert v["cause"] != "rank-missing" and (v["state"] in ("running", "ok") or v["state"] == "unknown" and any(
            e.startswith("read again") for e in v["evidence"])), text_of(rep)
    assert wait_for(lambda: status(work)[1]["verdict"]["state"] == "ok", 60), said


# f. The Slurm verdict of a missing module says a typo as the local gate does, asked on the job's node.

@pytest.mark.slow
def test_a_slurm_job_dead_of_a_typo_is_told_the_installed_name_not_to_install_it(slurm, tmp_path):
    (tmp_path / "train.py").write_text("import jsonn\nprint('training')\n")
    (tmp_path / "declared.py").write_text("import dfd_g3_declared\n")
    (tmp_path / "requirements.txt").write_text("dfd_g3_declared==1.0\n")
    typo = job_script(tmp_path, "srun python3 train.py\n")
    doc = slurm_launch(tmp_path, "-o", "o-%j.log", str(typo))
    v = doc["verdict"]
    assert v["cause"] == "missing-module", v
    assert "No module named 'jsonn', imported at train.py:1: did you mean `json` (installed, standard library)" \
        in v["summary"], v["summary"]
    assert v["fix"].startswith("Fix the import at train.py:1: did you mean `json`") and "Install 'jsonn'" not in \
        v["fix"] and re.search(r"Asked on \S+, in python3\.$", v["fix"]), v["fix"]
    # a name the project declares is still installed, as the local gate says
    declared = job_script(tmp_path, "srun python3 declared.py\n", name="declared.sbatch")
    v = slurm_launch(tmp_path, "-o", "d-%j.log", str(declared))["verdict"]
    assert v["cause"] == "missing-module" and "Install 'dfd_g3_declared'" in v["fix"], v
    assert "requirements.txt:1 declares it" in v["fix"], v["fix"]


# d. args.paths fails where the script is proved to open the path on every run; else it warns.

_PARSE = ("import argparse, os\np = argparse.ArgumentParser()\np.add_argument('--config', default='configs/base.yaml')\n")
_READS = {
    # proved: main() always called under the __main__ guard, open(...) on its only path
    "main": ("def main():\n    args = p.parse_args()\n    with open(args.config) as f:\n        print(f.read())\n\n"
             "if __name__ == '__main__':\n    main()\n", "fail"),
    # not proved: under a branch, after an existence check, in a try, or written by the code first
    "branch": ("args = p.parse_args()\nif os.environ.get('USE_CONFIG'):\n    print(open(args.config).read())\n",
               "warn"),
    "exists": ("def main():\n    args = p.parse_args()\n    if not os.path.exists(args.config):\n        return\n"
               "    print(open(args.config).read())\n\nmain()\n", "warn"),
    "try": ("args = p.parse_args()\ntry:\n    cfg = open(args.config).read()\nexcept OSError:\n    cfg = ''\n",
            "warn"),
    "written": ("args = p.parse_args()\nopen(args.config, 'w').write('lr: 1')\ncfg = open(args.config).read()\n",
                "warn"),
}


@pytest.mark.slow
def test_a_missing_path_fails_only_where_the_script_is_proved_to_open_it(tmp_path):
    for i, (case, (body, status)) in enumerate(_READS.items()):
        work = tmp_path / case
        (work / "configs").mkdir(parents=True)
        (work / "configs" / "small.yaml").write_text("lr: 1\n")
        (work / "train.py").write_text(_PARSE + body)
        # the first case through the console script, the others through the same entry here (support/in_process)
        res = (run_here if i else run_dfdoctor)("check", "--only", "args.paths", "--format", "json", "--",
                                                sys.executable, "train.py", "--config", "configs/small.yml", cwd=work)
        (chk,) = [c for c in json.loads(res.stdout)["checks"] if c["id"] == "args.paths"]
        assert chk["status"] == status and chk["cause"] == "input-missing", (case, chk)
        assert "did you mean configs/small.yaml?" in chk["summary"], chk["summary"]  # the closest file, offered
        assert "Pass --config configs/small.yaml (that file exists)" in chk["fix"], chk["fix"]
        assert res.returncode == (1 if status == "fail" else 0), (case, res.stdout[-2000:])
        assert (chk["basis"] == "observed") == (status == "fail"), (case, chk)


# e. "Another version has the name" is dependency-mismatch only where a pin of the project disagrees.

@pytest.mark.slow
def test_a_name_an_installed_package_lacks_is_no_version_mismatch_without_a_pin(slurm, tmp_path):
    """A Slurm job dead of `cannot import name` from an installed package was told dependency-mismatch, "install
    the version the project pins", for a project that pins nothing: a guess. Nothing established it."""
    job = job_script(tmp_path, f"srun {sys.executable} -c 'from numpy import NoSuchThingAtAll'\n")
    v = slurm_launch(tmp_path, "-o", "o-%j.log", str(job))["verdict"]
    assert v["cause"] == "import-error", v
    assert "whether another version of numpy has it was not established" in v["summary"], v["summary"]
    assert "pip install" not in v["fix"] and "none was tried" in v["fix"], v["fix"]
