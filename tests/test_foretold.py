"""Before and after, connected (doctor/diagnose/foretold.py): which pre-launch finding foretold the verdict, and
which observed failure the job will certainly meet (so `launch` stops before it starts)."""

from __future__ import annotations

from dfdoctor import causes
from dfdoctor.diagnose import foretold
from dfdoctor.model import OBSERVED, STATIC, CheckRecord, Status, Verdict

NCCL = CheckRecord(id="cuda.nccl", phase="pre", status=Status.FAIL, cause=causes.NCCL_FAILED, basis=OBSERVED,
                   summary="rank 0, rank 1 failed in cuda device: RuntimeError: rank 0 needs GPU 0, but torch sees 0")
WANDB = CheckRecord(id="imports.smoke", phase="pre", status=Status.WARN, cause=causes.MISSING_MODULE,
                    summary="conditional import of wandb fails (ModuleNotFoundError: No module named 'wandb')")


def died(cause: str, words: str) -> Verdict:
    return Verdict("failed", cause, "The job died.", "fix", [f"message: {words}"])


def test_a_check_that_observed_the_failure_is_named_in_the_verdict():
    v = foretold.link(died(causes.NCCL_FAILED, "RuntimeError: Distributed package doesn't have NCCL built in"), [NCCL])
    assert v.summary.endswith("cuda.nccl predicted this before the launch.")
    assert v.evidence[0].startswith("before the launch, cuda.nccl (fail): rank 0, rank 1 failed")


def test_a_warning_about_another_import_foretells_nothing():
    other = foretold.link(died(causes.MISSING_MODULE, "ModuleNotFoundError: No module named 'yaml'"), [WANDB])
    assert "before the launch" not in other.summary
    same = foretold.link(died(causes.MISSING_MODULE, "ModuleNotFoundError: No module named 'wandb'"), [WANDB])
    assert same.summary.endswith("imports.smoke warned of this before the launch.")


def test_a_running_job_is_left_alone():
    v = Verdict("running", None, "The job is running.", "", [])
    assert foretold.link(v, [NCCL]) is v


def test_nccl_that_cannot_form_blocks_a_job_that_asks_for_nccl_and_only_that(tmp_path):
    (tmp_path / "train.py").write_text("backend = 'nccl' # 'nccl', 'gloo', etc.\n"
                                       "init_process_group(backend=backend)\n")
    (blocker,) = foretold.certain([NCCL], ["torchrun", "--nproc_per_node=2", "train.py"], tmp_path)
    assert "the job uses NCCL: train.py:1 sets backend = 'nccl'" in blocker.evidence[-1]
    assert foretold.certain([NCCL], ["torchrun", "train.py", "--backend=gloo"], tmp_path) == []
    (tmp_path / "gloo.py").write_text("init_process_group(backend='gloo')\n")
    assert foretold.certain([NCCL], ["torchrun", "gloo.py"], tmp_path) == []
    static = CheckRecord(**{**NCCL.__dict__, "basis": STATIC})
    assert foretold.certain([static], ["torchrun", "train.py"], tmp_path) == []  # a reading never blocks
