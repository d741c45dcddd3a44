"""Shared test fixtures: the installed console script, and a guard that no test leaves a process behind."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Optional

import psutil
import pytest
from support.linked import stale_line

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DFDOCTOR = str(BIN / "dfdoctor")

# Every process a test starts inherits this marker, daemons included, so the session can find leftovers.
SESSION_MARK = "DFDOCTOR_TEST_SESSION"
os.environ[SESSION_MARK] = uuid.uuid4().hex

# The user's index of runs (dfdoctor.run.index) is this session's own: a plain `status` in a folder without runs
# must not find another session's launches (seven sessions share this machine's home folder).
import tempfile  # noqa: E402
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="dfdoctor-test-state-")

# Per-test CPU seconds (bench/test_cpu.py sets the folder): tests/support/cpu_meter.py.
if os.environ.get("DFDOCTOR_CPU_METER"):
    pytest_plugins = ["support.cpu_meter"]
# When each test ran and on which worker (a full run's idle spells): tests/support/timeline.py.
if os.environ.get("DFDOCTOR_TIMELINE"):
    pytest_plugins = [*globals().get("pytest_plugins", []), "support.timeline"]


# ---- parallel runs: `make test` spreads the tests over pytest-xdist workers ------------------------------------
# A file's tests run on one worker, in order: module fixtures (a wheel, a browser) are built once, and tests that
# look for "their" processes by a name only their file starts never see a sibling's. Tests that share state beyond
# their file share one worker. The single-node Slurm's tests are three units that run side by side on the one
# cluster (its node has CPUs for all of them; tests/infra/slurm_fixtures.py has each test hold the cluster shared,
# and test_slurm_alone's, which take the node from the others, hold it alone, all in one go). The two-node pair is
# a cluster of its own (its own slurmctld, slurmds and network namespaces; only munged is shared) and its tests are a second unit: the
# pair's node quirks are files that every job of the pair reads. test_rehearse asserts that
# no rehearsal's sentinel runs anywhere once its own is done: the files whose tests rehearse lines
# (check --shell-command) most run with it, not beside it.
# (xdist's own `--dist loadgroup` cannot do this here: it marks a group by rewriting `item._nodeid`, which
# pytest 9 no longer reads, so its groups are silently ignored. A scheduler of our own names the units instead.)
SHARED_STATE_GROUPS = {
    "test_slurm.py": "slurm",
    "test_slurm_alone.py": "slurm",
    "test_slurm_observed.py": "slurm-observed",
    "test_slurm_stuck.py": "slurm-stuck",
    "test_slurm_stop.py": "slurm-stuck",
    "test_slurm_nodes.py": "slurm-pair",
    "test_rehearse.py": "rehearsals",
    "test_launch_path.py": "rehearsals",
    "test_launch_path_chain.py": "rehearsals",
}
# Files whose tests are independent of each other (each its own tmp_path, folder in the container, marker) and
# long enough to be the run's tail alone: their tests are spread over the workers one by one. test_guard,
# test_compile_race and test_trainer are torch.compile runs, each a core's worth of CPU for half a minute or more:
# on one worker they ran one after another while the other core idled.
# test_stuck, test_running_earned, test_rendezvous_wait, test_silent_helpers and test_stop wait more than they
# work (a watch of 20-60 s a test, 10-35 CPU-s a file): on one worker each their waits came one after another,
# 100-300 s a file (round 20); each test's jobs run in its own tmp_path, found by its run folder or marker or pid.
SPREAD_FILES = {"test_doc_commands.py", "test_launch.py", "test_launcher_scripts.py", "test_guard.py",
                "test_compile_race.py", "test_trainer.py", "test_realworld.py", "test_install_lines.py",
                "test_corpus.py", "test_stuck.py", "test_running_earned.py", "test_rendezvous_wait.py",
                "test_silent_helpers.py", "test_stop.py"}
# Single tests of a spread file that share a group's state: the docs' sbatch commands run on the single-node Slurm.
# The spread files' short tests that import torch (and torch._dynamo) into the worker itself share one worker: each
# worker that imports them pays ~1.8 CPU-s once, and spread one by one they had four workers import them (round 19).
# One more imports it there (round 24, seen by a meta-path hook in the worker): the unproven-torch test, through
# guard.check_torch (its message names torch.__version__); it had a worker import torch for it alone. So does the
# eager trainer run, which loads its checkpoint back with torch.load (in the unit since round 24 too).
TORCH_IN_PROCESS = "torch-in-process"
# test_stuck's two tests of one hung torchrun (a module fixture launches it once) share a worker; the unit keeps
# the launch test's name, so the seconds measured for it weigh the pair until a full run measures both.
SKIPS_AN_ALL_REDUCE = "tests/test_stuck.py::test_a_rank_that_skips_an_all_reduce_is_named"
# The tests that run scripts racing torch.compile as forks of one server (support/torch_forks.py) share a worker and
# its `torch_forks_server`: each had its own server, an import of torch and dynamo (~3.5-4 CPU-s) per test.
TORCH_FORKS = "torch-forks"
SHARED_STATE_TESTS = {
    "test_doc_commands.py::test_an_sbatch_check_launch_and_status": "slurm-stuck",
    **{name: TORCH_FORKS for name in (
        "test_guard.py::test_user_shaped_script_races_unguarded_and_completes_with_the_guard",
        "test_guard.py::test_pipeline_handing_tensors_between_guarded_steps_completes_5_of_5",
        "test_guard.py::test_installed_gate_covers_lazy_backward_compiles_of_threads_without_the_guard",
        "test_trainer.py::test_race_preset_crashes_without_the_guard_and_trains_with_it")},
    "test_stuck.py::test_a_rank_that_skips_an_all_reduce_is_named": SKIPS_AN_ALL_REDUCE,
    "test_stuck.py::test_status_names_a_collective_hang_later": SKIPS_AN_ALL_REDUCE,
    **{f"test_guard.py::{name}": TORCH_IN_PROCESS for name in (
        "test_install_gates_the_lazy_backward_compile_once_per_process",
        "test_entry_check_waits_out_another_threads_compile_and_keeps_torchs_answer_otherwise",
        "test_setup_thread_sets_the_flag_and_copies_shared_config_per_thread",
        "test_decorator_applies_the_thread_settings_and_returns_the_result",
        "test_unproven_torch_is_refused_with_a_clear_message")},
    **{f"test_trainer.py::{name}": TORCH_IN_PROCESS for name in (
        "test_block_diffusion_mask", "test_flex_and_sdpa_agree_on_cpu", "test_trainer_default_guard_is_the_public_api",
        "test_eager_run_trains_logs_and_checkpoints")},
}
# The longest units start first, so that none is left running alone at the end: seconds per unit, measured in a
# full run (tests/support/unit_seconds.py writes the file from a JUnit report; a unit not named is short). Ordering
# spread tests by their file's total had started the single-node Slurm unit (6 minutes alone) last (round 7).
import json  # noqa: E402
UNIT_SECONDS: dict = json.loads((REPO / "tests" / "unit_seconds.json").read_text())


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its group, itself (a spread file's test), or its file."""
    path = nodeid.split("::", 1)[0]
    name = path.rsplit("/", 1)[-1]
    if name in SHARED_STATE_GROUPS:
        return SHARED_STATE_GROUPS[name]
    test = f"{name}::{nodeid.split('::', 1)[-1].split('[', 1)[0]}"
    if test in SHARED_STATE_TESTS:
        return SHARED_STATE_TESTS[test]
    return nodeid if name in SPREAD_FILES else path


# Units split off a measured one weigh a share of it until a full run measures them (round 16 split `slurm`).
SPLIT_OFF = {"slurm-observed": ("slurm", 3), "slurm-stuck": ("slurm", 3)}


def _weight(nodeid: str, tests_of: Optional[dict] = None) -> int:
    """The unit's measured seconds. A test of a file spread since it was measured whole weighs an equal share of
    the file's seconds (`tests_of`: how many tests each file has) until a full run measures it: weighing nothing,
    the file's long waits would start last."""
    unit = work_unit(nodeid)
    if unit not in UNIT_SECONDS and unit in SPLIT_OFF:
        whole, parts = SPLIT_OFF[unit]
        return UNIT_SECONDS.get(whole, 0) // parts
    path = nodeid.split("::", 1)[0]
    if unit not in UNIT_SECONDS and unit == nodeid and path in UNIT_SECONDS and tests_of:
        return UNIT_SECONDS[path] // max(1, tests_of.get(path, 1))
    # a test moved into a group since the last full run still has its own seconds: the group weighs them too
    # (a full run's file names the group alone again), so that it does not start late as a short unit
    joined = sum(UNIT_SECONDS.get(f"tests/{test}", 0) for test, group in SHARED_STATE_TESTS.items()
                 if group == unit and f"tests/{test}" != unit)
    return UNIT_SECONDS.get(unit, 0) + joined


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, pytest runs the tests serially
def pytest_xdist_make_scheduler(config, log):
    """Units as `work_unit` names them, handed out in the order of the collection (which `pytest_collection_
    modifyitems` below sorts longest first)."""
    if config.getvalue("dist") not in ("load", "loadscope", "loadfile", "loadgroup"):
        return None  # `--dist each` and the like keep xdist's meaning
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)


TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """The controller tells each worker the terminal size variables it has (most often none)."""
    node.workerinput["terminal_size_env"] = {k: os.environ.get(k) for k in TERMINAL_SIZE}


def pytest_configure(config):
    """A worker starts with COLUMNS=80 and LINES=24 in its environment where the controller had none (seen with
    xdist 3.8); every dfdoctor a test starts would then wrap its text at 80 columns instead of its own default.
    The worker takes the controller's values back.

    A module added since `make venv` is not in the venv's link tree (Makefile): the session stops with one line
    that says so (in the controller), before a test fails for it far from the cause."""
    stale = None if hasattr(config, "workerinput") else stale_line(REPO)
    if stale:
        pytest.exit(stale, returncode=2)
    given = getattr(config, "workerinput", {}).get("terminal_size_env")
    for name, value in (given or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_collection_modifyitems(config, items):
    """Under xdist, the longest units first (a stable sort: each file's tests keep their order)."""
    if not hasattr(config, "workerinput"):
        return
    tests_of = collections.Counter(item.nodeid.split("::", 1)[0] for item in items)
    items.sort(key=lambda item: -_weight(item.nodeid, tests_of))


def marked_processes() -> list[psutil.Process]:
    """Processes (other than pytest itself) that carry this test session's marker in their environment."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid"]):
        if p.pid == me:
            continue
        try:
            if p.environ().get(SESSION_MARK) == os.environ[SESSION_MARK] and _running(p):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


# A process still ending by itself when the session ends (a look's ssh session after its rehearsal, a daemon's
# stop, a torch child's teardown) can take several seconds on a loaded 2-core machine (CI: 6 workers); one that is
# really left (a daemon, a job, a bash waiting for one) outlives any of them. A process is named only when it is
# still marked, running and no zombie after this grace: a zombie has ended (its parent reaps it), and one that
# ended between the last look and the naming is no leftover.
LEFT_GRACE_S = 30.0


@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes():
    """Fail the session if any process started by a test is still alive at the end (then kill it)."""
    yield
    left = left_behind(LEFT_GRACE_S)
    named = [f"{p.pid} {_command_of(p)}" for p in left]  # before the kill: a zombie's command cannot be read
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    assert not left, "processes left behind: " + "; ".join(named)


def left_behind(grace: float, marked=None) -> list[psutil.Process]:
    """The marked processes still running `grace` seconds from now (as soon as none is: at once). `marked`: the
    finder of the candidates (marked_processes; a test narrows it to its own)."""
    marked = marked or marked_processes
    deadline = time.monotonic() + grace
    left = marked()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked()
    return [p for p in left if _running(p)]


def _running(p: psutil.Process) -> bool:
    """Alive now (the same process: psutil compares its start time), not a zombie nor dead."""
    try:
        return p.is_running() and p.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def _command_of(p: psutil.Process) -> str:
    """A leftover's command line, as far as it can still be read."""
    try:
        return " ".join(p.cmdline())[:120] or p.name()
    except psutil.Error:
        return "(ended)"


@pytest.fixture(scope="session")
def torch_forks_server():
    """support/torch_forks.py's `run`, one server per worker for the `TORCH_FORKS` tests (stopped before the
    session's leftover check)."""
    from support.torch_forks import torch_forks

    with torch_forks(REPO) as run:
        yield run


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory, monkeypatch):
    """Each test gets an empty dfdoctor cache (XDG_CACHE_HOME, inherited by every dfdoctor it starts): no test
    reuses another's compile.race reproduction, and none writes into the user's ~/.cache."""
    path = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path / "dfdoctor"


def run_dfdoctor(*args: str, cwd: os.PathLike | str | None = None, env: dict | None = None,
                 timeout: float = 120, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run the installed `dfdoctor` console script in a real subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("NO_COLOR", "1")
    return subprocess.run([DFDOCTOR, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, input=input)


@pytest.fixture
def dfdoctor():
    """The `run_dfdoctor` helper as a fixture."""
    return run_dfdoctor


def broken_plugin_site(site: Path) -> Path:
    """A site folder holding a distribution whose dfdoctor check cannot be imported (put it on PYTHONPATH)."""
    dist = site / "dfdoctor_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dfdoctor-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dfdoctor.checks]\nbroken.import = no_such_module_xyz:check\n")
    return site


def pip_install_to(src: Path, target: Path) -> None:
    """A real `pip install` of a local distribution into its own folder (put it on PYTHONPATH to use it)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True, timeout=300)
