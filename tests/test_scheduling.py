"""How `make test` spreads the suite over workers (tests/conftest.py): which tests share a worker, and the measured
seconds that order the units."""

from __future__ import annotations

from pathlib import Path

import conftest
from conftest import (REPO, SHARED_STATE_GROUPS, SHARED_STATE_TESTS, TORCH_IN_PROCESS, UNIT_SECONDS, _weight,
                      work_unit)
from support.unit_seconds import unit_seconds


def test_the_single_node_slurm_is_three_units_side_by_side_and_the_pair_has_its_own():
    """The single node's tests share the cluster under its lock (tests/infra/slurm_fixtures.py), three workers at
    once; each file stays on one worker, and units split off `slurm` weigh a share of it until measured."""
    assert work_unit("tests/test_slurm.py::test_time_limit") == work_unit("tests/test_slurm_alone.py::test_x") == \
        "slurm"
    assert work_unit("tests/test_slurm_observed.py::test_x") == "slurm-observed"
    assert work_unit("tests/test_slurm_stuck.py::test_y") == work_unit("tests/test_slurm_stop.py::test_z") == \
        work_unit("tests/test_doc_commands.py::test_an_sbatch_check_launch_and_status") == "slurm-stuck"
    assert work_unit("tests/test_slurm_nodes.py::test_z[drop]") == "slurm-pair"
    for unit in ("slurm-observed", "slurm-stuck"):
        assert _weight(f"tests/test_{unit.replace('-', '_')}.py::test_a") == \
            UNIT_SECONDS.get(unit, UNIT_SECONDS["slurm"] // 3)
    # a spread file's other tests are units of their own; an ordinary file is one unit
    assert work_unit("tests/test_doc_commands.py::test_many_targets_at_once") == \
        "tests/test_doc_commands.py::test_many_targets_at_once"
    assert work_unit("tests/test_cli.py::test_a") == work_unit("tests/test_cli.py::test_b") == "tests/test_cli.py"


def test_the_spread_files_tests_that_import_torch_in_the_worker_share_one():
    """Each named test exists and imports torch in the worker; they are one unit, the file's others stay spread."""
    named = [t for t, unit in SHARED_STATE_TESTS.items() if unit == TORCH_IN_PROCESS]
    assert {work_unit(f"tests/{t}") for t in named} == {TORCH_IN_PROCESS} and len(named) == 9
    for test in named:
        path, name = test.split("::")
        body = (REPO / "tests" / path).read_text().split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
        # guard.check_torch imports torch to name its version when it refuses one
        assert "import torch" in body or "dfdoctor.trainer" in body or "guard.check_torch()" in body, test
    assert work_unit("tests/test_guard.py::test_guarded_steps_may_nest_and_wait_on_each_other") == \
        "tests/test_guard.py::test_guarded_steps_may_nest_and_wait_on_each_other"


def test_a_test_of_a_file_spread_since_it_was_measured_whole_weighs_a_share_of_the_file(monkeypatch):
    """test_stuck.py was one unit of 293 s; spread, each of its tests weighs a share of that until a full run
    measures it (weighing nothing, the file's tests would start last, a wait of up to 35 s left for the end)."""
    monkeypatch.setattr(conftest, "UNIT_SECONDS", {"tests/test_stuck.py": 300, "tests/test_stuck.py::test_b": 40})
    assert work_unit("tests/test_stuck.py::test_a") == "tests/test_stuck.py::test_a"
    tests_of = {"tests/test_stuck.py": 30}
    assert _weight("tests/test_stuck.py::test_a[x]", tests_of) == 10
    assert _weight("tests/test_stuck.py::test_b", tests_of) == 40  # measured: its own seconds
    assert _weight("tests/test_cli.py::test_a", tests_of) == 0  # no file measured: short


def test_a_test_moved_into_a_group_since_it_was_measured_adds_its_seconds_to_the_group(monkeypatch):
    """The eager trainer run weighed 34 s as a unit of its own; in the torch-in-process unit (measured at 9 s
    without it) it still weighs them until a full run measures the unit whole: counted as a 9 s unit, the 43 s of
    work would start among the last. A group named after one of its tests counts that test once."""
    eager = "test_trainer.py::test_eager_run_trains_logs_and_checkpoints"
    monkeypatch.setattr(conftest, "UNIT_SECONDS", {TORCH_IN_PROCESS: 9, f"tests/{eager}": 34})
    assert _weight(f"tests/{eager}") == _weight("tests/test_trainer.py::test_block_diffusion_mask") == 43
    monkeypatch.setattr(conftest, "UNIT_SECONDS", {TORCH_IN_PROCESS: 45})  # the next full run's file
    assert _weight(f"tests/{eager}") == 45
    skips = "tests/test_stuck.py::test_a_rank_that_skips_an_all_reduce_is_named"
    monkeypatch.setattr(conftest, "UNIT_SECONDS", {skips: 17})
    assert _weight("tests/test_stuck.py::test_status_names_a_collective_hang_later") == 17


def test_every_measured_unit_still_exists():
    """A renamed file or test leaves its seconds behind: the ordering would silently lose it."""
    groups = set(SHARED_STATE_GROUPS.values()) | set(SHARED_STATE_TESTS.values())
    for unit in UNIT_SECONDS:
        if unit in groups:
            continue
        path, _, test = unit.partition("::")
        assert (REPO / path).is_file(), unit
        if test:
            assert f"def {test.split('[', 1)[0]}(" in (REPO / path).read_text(), unit


def test_unit_seconds_adds_up_a_junit_report_by_unit(tmp_path: Path):
    report = tmp_path / "run.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.test_slurm_stop" name="test_a" time="200.5"/>'
        '<testcase classname="tests.test_slurm_stuck" name="test_b" time="100"/>'
        '<testcase classname="tests.test_cli" name="test_c" time="3"/>'
        '<testcase classname="tests.test_cli" name="test_d" time="4"/>'
        '<testcase classname="tests.test_guard" name="test_e[x]" time="80"/>'
        '<testcase classname="tests.test_tiny" name="test_f" time="1"/>'
        '</testsuite></testsuites>')
    assert unit_seconds(report) == {"slurm-stuck": 300, "tests/test_guard.py::test_e[x]": 80, "tests/test_cli.py": 7}


def test_the_tests_that_fork_compiling_runs_from_one_server_share_its_worker():
    """The tests whose runs are forks of conftest's `torch_forks_server` (support/torch_forks.py) are one unit, so
    that one server (an import of torch and dynamo, ~3.5-4 CPU-s) serves them all; no other test asks for it."""
    from conftest import TORCH_FORKS

    named = {t for t, unit in SHARED_STATE_TESTS.items() if unit == TORCH_FORKS}
    asking = set()
    for path in sorted((REPO / "tests").glob("test_*.py")):
        for chunk in path.read_text().split("\ndef test_")[1:]:
            if "torch_forks_server" in chunk.split(")", 1)[0]:
                asking.add(f"{path.name}::test_{chunk.split('(', 1)[0]}")
    assert named == asking and len(named) == 4, (named, asking)
    assert {work_unit(f"tests/{t}") for t in named} == {TORCH_FORKS}
