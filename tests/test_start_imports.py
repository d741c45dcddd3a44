"""Issue 45: a dfdoctor command imports what it uses, not what another command or an option it was not given
needs (every start pays its imports: the suite starts dfdoctor ~1,240 times, a user on every command). Each test
runs the real command in a fresh interpreter and lists the modules it had loaded when it ended."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# at its exit (its own process only, not one it forks) a process writes the names of the modules it loaded
_NOTE_MODULES = """
import atexit, json, os, sys
out, me = sys.argv[1], os.getpid()
def noted():
    if os.getpid() == me:
        with open(out, "w") as f:
            json.dump(sorted(sys.modules), f)
atexit.register(noted)
"""
# runs `dfdoctor ARGS` in this interpreter; at its exit (its own process only, not a forked check worker) it
# writes the names of the modules loaded
_RUN = _NOTE_MODULES + """
sys.argv = ["dfdoctor"] + sys.argv[2:]
from dfdoctor.cli.main import entry
entry()
"""


def _modules(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    seen = tmp_path / "modules.json"
    p = subprocess.run([sys.executable, "-c", _RUN, str(seen), *args], cwd=tmp_path, capture_output=True,
                       text=True, timeout=180)
    return p, set(json.loads(seen.read_text()))


def _quick_launch_and_its_status(tmp_path):
    """The modules loaded by `launch --no-check` of a job that prints a line and ends, then by `status` of its
    run; each said OK."""
    p, launched = _modules(tmp_path, "launch", "--no-check", "--format", "json", "--", sys.executable, "-c",
                           "print('step 1')")
    report = json.loads(p.stdout)
    assert report["verdict"]["state"] == "ok", p.stdout + p.stderr
    p, status = _modules(tmp_path, "status", report["run"]["id"], "--format", "json")
    assert json.loads(p.stdout)["verdict"]["state"] == "ok", p.stdout + p.stderr
    return launched, status


def _checks(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("dfdoctor.checks.") and not m.startswith("dfdoctor.checks.probes")}


def test_check_only_one_check_imports_that_checks_module_alone(tmp_path: Path):
    p, loaded = _modules(tmp_path, "check", "--only", "imports.smoke", "--format", "json", "--", sys.executable,
                         "-c", "pass")
    report = json.loads(p.stdout)
    assert [c["id"] for c in report["checks"]] == ["imports.smoke"], p.stdout + p.stderr
    assert report["verdict"]["state"] == "ok"
    assert _checks(loaded) == {"dfdoctor.checks.imports_smoke"}
    for other in ("dfdoctor.rehearse.fix", "dfdoctor.slurm.precheck", "dfdoctor.checks.launch_path"):
        assert other not in loaded, other
    # the checks' entry points are read without importlib.metadata (entrypoints.py), and its email parser
    assert not {"importlib.metadata", "email.message", "email.parser"} & loaded
    # a local check hashes nothing: hashlib (OpenSSL, 20 M instructions) is imported where something is hashed
    assert not {"hashlib", "_hashlib", "hmac", "secrets"} & loaded


def test_check_skip_leaves_the_skipped_checks_unimported_and_an_only_is_told_against_every_check(tmp_path: Path):
    p, loaded = _modules(tmp_path, "check", "--skip", "launch.*", "--skip", "compile.*", "--format", "json", "--",
                         sys.executable, "-c", "pass")
    ids = {c["id"] for c in json.loads(p.stdout)["checks"]}
    assert "imports.smoke" in ids and not {"launch.path", "compile.race"} & ids, p.stdout + p.stderr
    assert "dfdoctor.checks.imports_smoke" in loaded
    assert not {"dfdoctor.checks.launch_path", "dfdoctor.checks.compile_race"} & loaded
    # an --only matching only checks a --skip names is no bad usage: it is told against every check
    p, _ = _modules(tmp_path, "check", "--only", "compile.*", "--skip", "compile.*", "--", sys.executable, "-c",
                    "pass")
    assert p.returncode == 0, p.stdout + p.stderr
    # and an --only that matches nothing lists every check, those it left unloaded too
    p, _ = _modules(tmp_path, "check", "--only", "nothing.such", "--", sys.executable, "-c", "pass")
    assert p.returncode == 2 and "launch.path" in p.stderr and "slurm.submission" in p.stderr, p.stderr


def test_version_imports_no_command_s_modules(tmp_path: Path):
    """--version is answered by the command line's group: no command's module (each is loaded when named), nor
    the engine, the targets, the placements, the run folders or the renderers behind them (round 27: 255 -> 171 M
    instructions)."""
    from dfdoctor import __version__
    p, loaded = _modules(tmp_path, "--version")
    assert (p.returncode, p.stdout) == (0, f"dfdoctor, version {__version__}\n"), p.stdout + p.stderr
    assert not [m for m in loaded if m.startswith("dfdoctor.cli.") and m != "dfdoctor.cli.main"]
    assert not {"dfdoctor.engine", "dfdoctor.targets", "dfdoctor.placements", "dfdoctor.run.folder", "dfdoctor.redact",
                "dfdoctor.render", "subprocess", "tempfile", "pathlib"} & loaded


def test_a_check_on_one_target_imports_neither_the_fleet_nor_the_env_command(tmp_path: Path):
    p, loaded = _modules(tmp_path, "check", "--only", "args.*", "--", sys.executable, "-c", "pass")
    assert p.returncode == 0, p.stdout + p.stderr
    assert not {"dfdoctor.fleet", "dfdoctor.cli.env"} & loaded
    # a --targets-file is checked as a fleet (one row per target): it does load it
    (tmp_path / "targets.txt").write_text("local\n")
    p, loaded = _modules(tmp_path, "check", "--only", "args.*", "--targets-file", "targets.txt", "--",
                         sys.executable, "-c", "pass")
    assert p.returncode == 0 and "1 target(s)" in p.stdout, p.stdout + p.stderr
    assert "dfdoctor.fleet" in loaded


def test_report_reads_a_saved_result_without_the_runner_the_probe_server_or_psutil(tmp_path: Path):
    p, loaded = _modules(tmp_path, "check", "--only", "args.known", "--format", "json", "--output", "r.json", "--",
                         sys.executable, "-c", "pass")
    assert p.returncode == 0 and "dfdoctor.runner" in loaded, p.stdout + p.stderr
    p, loaded = _modules(tmp_path, "report", "r.json", "-q")
    assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr
    assert not {"dfdoctor.runner", "dfdoctor.probe_server", "psutil", "dfdoctor.root_causes"} & loaded
    # nor socket (14 M instructions): only a check's environment facts name the host
    assert "socket" not in loaded
    # nor what a command that builds a context or reaches a target imports (round 27: 267 -> 223 M instructions):
    # the targets (every kind, subprocess behind them), the placements, the config, `check`'s own module, and the
    # temp files and shutil of the run folders that a launch makes and prunes
    assert not {"dfdoctor.targets", "dfdoctor.context", "dfdoctor.config", "dfdoctor.placements", "dfdoctor.cli.check",
                "subprocess", "tempfile", "shutil"} & loaded


def test_a_check_of_a_plain_script_imports_no_stack_reading_statistics_or_rehearsal(tmp_path: Path):
    """compile.race reads stacks (and takes medians) only of a reproduction it ran, launch.path and
    persistence.session rehearse only a launch line: a check of a plain script that compiles in no thread imports
    none of them into dfdoctor's process."""
    (tmp_path / "train.py").write_text("print('step 1')\n")
    p, loaded = _modules(tmp_path, "check", "--format", "json", "--", sys.executable, "train.py")
    checks = json.loads(p.stdout)["checks"]
    race = next(c for c in checks if c["id"] == "compile.race")
    assert race["status"] == "skip", race
    assert "dfdoctor.checks.compile_race" in loaded
    assert not {"dfdoctor.diagnose.stackclass", "statistics"} & loaded
    # nor the rehearsal of a launch line (launch.path, persistence.session): a plain command has none
    assert "dfdoctor.checks.launch_path" in loaded and "dfdoctor.checks.persistence" in loaded
    assert not [m for m in loaded if m.startswith("dfdoctor.rehearse")]
    # nor the Slurm checks (scope "slurm": a submission's alone, loaded by `check -- sbatch ...`)
    assert "dfdoctor.checks.slurm_checks" not in loaded and "slurm.gpus" not in {c["id"] for c in checks}


def test_a_verdict_that_needs_no_fix_reads_no_project_model(tmp_path: Path):
    """The project model (doctor/project, diagnose/user_terms: 0.01 CPU-s of a start) writes a failure's fix in
    the project's own terms: a launch whose job ends well, and a status of its run, import none of it. A job that
    fails for a missing module still gets its fix from it."""
    p, loaded = _modules(tmp_path, "launch", "--no-check", "--format", "json", "--", sys.executable, "-c",
                         "print('step 1')")
    report = json.loads(p.stdout)
    assert report["verdict"]["state"] == "ok", p.stdout + p.stderr
    unread = {"dfdoctor.project", "dfdoctor.diagnose.user_terms"}
    assert not unread & loaded
    p, loaded = _modules(tmp_path, "status", report["run"]["id"], "--format", "json")
    assert json.loads(p.stdout)["verdict"]["state"] == "ok", p.stdout + p.stderr
    assert not unread & loaded
    (tmp_path / "train.py").write_text("import tqdmm\n")
    p, loaded = _modules(tmp_path, "launch", "--no-check", "--format", "json", "--", sys.executable, "train.py")
    verdict = json.loads(p.stdout)["verdict"]
    assert verdict["cause"] == "missing-module" and "tqdm" in verdict["fix"], p.stdout + p.stderr
    assert unread <= loaded


def test_a_running_verdict_reads_no_project_model(tmp_path: Path):
    """A live job's verdict asks whether its processes wait in a tcp:// or env:// rendezvous
    (diagnose/spawn_rendezvous.py, env_rendezvous.py); the project model answers only for such a wait, so a job
    seen running imports none of it (it did, before the question was asked: 41 M instructions of a launch).
    (A look at one process without concurrent.futures' pool, 32 M more, was tried in round 23 and taken back: the
    empty-loader reading of test_empty_loop lost its verdict on an idle machine with it.)"""
    job = "import time\nfor i in range(150):\n    print('step', i, flush=True)\n    time.sleep(0.2)\n"
    (tmp_path / "job.py").write_text(job)
    p, loaded = _modules(tmp_path, "launch", "--no-check", "--watch", "20", "--format", "json", "--",
                         sys.executable, "job.py")
    report = json.loads(p.stdout)
    try:
        assert report["verdict"]["state"] == "running", p.stdout + p.stderr
        assert not {"dfdoctor.project", "dfdoctor.diagnose.user_terms"} & loaded
        assert "dfdoctor.diagnose.jobstacks" in loaded
    finally:
        subprocess.run([sys.executable, "-m", "dfdoctor", "stop", report["run"]["id"]], cwd=tmp_path,
                       capture_output=True, timeout=60)

def test_status_of_an_ended_run_starts_no_thread_pool_and_reads_toml_only_for_a_config_file(tmp_path: Path):
    """`status` of a run whose job ended takes no look at stacks: the thread pool of the looks (concurrent.futures,
    and logging behind it) stays unimported, and so does the TOML reader where no config file is there to read."""
    p, _ = _modules(tmp_path, "launch", "--no-check", "--format", "json", "--", sys.executable, "-c",
                    "print('step 1')")
    run = json.loads(p.stdout)["run"]["id"]
    p, loaded = _modules(tmp_path, "status", run, "--format", "json")
    assert json.loads(p.stdout)["verdict"]["state"] == "ok", p.stdout + p.stderr
    assert not {"concurrent.futures", "logging", "tomllib"} & loaded
    # a config file is still read (its TOML reader imported for it)
    (tmp_path / "dfdoctor.toml").write_text("")
    p, loaded = _modules(tmp_path, "status", run, "--format", "json")
    assert p.returncode == 0 and "tomllib" in loaded, p.stdout + p.stderr


# what a look at a live job's stacks takes: psutil, the looks and their readings
_LOOKS = {"psutil", "dfdoctor.diagnose.jobstacks", "dfdoctor.diagnose.stuck", "dfdoctor.diagnose.look",
          "dfdoctor.diagnose.waits", "dfdoctor.diagnose.silence", "dfdoctor.diagnose.stackclass"}


def test_a_job_that_ends_at_once_is_launched_and_judged_without_psutil_or_the_stack_looks(tmp_path: Path):
    """A job that ends before any look at its stacks: its launch (whose watch asks, of a job it sees alive,
    whether torchrun runs it: answered from /proc) and a status of its run import neither psutil nor the looks
    (0.07 G instructions of each, round 25), while a job seen running does (test_a_running_verdict_...), and so
    does a status with a look (below)."""
    for loaded in _quick_launch_and_its_status(tmp_path):
        assert not _LOOKS & loaded, _LOOKS & loaded
    # a job that fails is judged without them too (its traceback is read, not its stacks)
    (tmp_path / "train.py").write_text("raise SystemExit('no data here')\n")
    p, loaded = _modules(tmp_path, "launch", "--no-check", "--format", "json", "--", sys.executable, "train.py")
    assert json.loads(p.stdout)["verdict"]["state"] == "failed", p.stdout + p.stderr
    assert not _LOOKS & loaded, _LOOKS & loaded
    # a status of a live job, not watched (--watch 0), looks at it: psutil and the looks are imported for that
    job = "import time\nprint('step 1', flush=True)\ntime.sleep(60)\n"
    (tmp_path / "job.py").write_text(job)
    p, _ = _modules(tmp_path, "launch", "--no-check", "--watch", "0", "--format", "json", "--", sys.executable,
                    "job.py")
    run = json.loads(p.stdout)["run"]["id"]
    try:
        p, loaded = _modules(tmp_path, "status", run, "--watch", "0", "--format", "json")
        assert json.loads(p.stdout)["verdict"]["state"] != "ok", p.stdout + p.stderr
        assert {"psutil", "dfdoctor.diagnose.jobstacks"} <= loaded, p.stdout + p.stderr
    finally:
        subprocess.run([sys.executable, "-m", "dfdoctor", "stop", run], cwd=tmp_path, capture_output=True, timeout=60)


def test_whether_torchrun_runs_a_job_is_read_from_proc_as_psutil_reads_it(tmp_path: Path):
    """The watch asks every job it sees alive whether torchrun's agent is in its tree (watch/settle._torchrun),
    from /proc without psutil: each command line is read as psutil's cmdline() gives it, a title that a process
    set with spaces instead of NULs (setproctitle, `exec -a`) split at its spaces, as psutil splits it."""
    import psutil
    from dfdoctor.agent.procfs import psutil_cmdline
    from dfdoctor.watch import settle
    title = "torchrun --nproc_per_node 3 train.py"
    # one word, with spaces, for its whole command line: `cat` with no argument, waiting on its stdin
    shell = subprocess.Popen(["bash", "-c", f"sleep 30 & exec -a '{title}' cat"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while psutil_cmdline(shell.pid) != title.split() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert psutil_cmdline(shell.pid) == psutil.Process(shell.pid).cmdline() == title.split()
        assert settle._torchrun(shell.pid) == (shell.pid, 3)  # the job itself is the agent
        # and every process here reads alike (those psutil can read)
        for p in psutil.process_iter():
            try:
                want = p.cmdline()
            except psutil.Error:
                continue
            try:
                got = psutil_cmdline(p.pid)
            except OSError:
                continue  # it ended between the two reads
            assert got == want or not psutil.pid_exists(p.pid), (p.pid, got, want)
    finally:
        for kid in psutil.Process(shell.pid).children():
            kid.kill()
        shell.kill()
        shell.communicate()
    assert settle._torchrun(shell.pid) is None  # gone: no agent


# runs the recorder as a launch starts it (python -S, from the agent's folder) and, at its exit (its own process,
# not the stand-in it forks), writes the names of the modules it had loaded
_RECORDER = _NOTE_MODULES + """
sys.argv = sys.argv[2:]
sys.path.insert(0, sys.argv[0])  # as `python AGENT` has it (runpy.run_path would import pkgutil, and typing)
loader = os.path.join(sys.argv[0], "__main__.py")
with open(loader) as f:
    exec(compile(f.read(), loader, "exec"), {"__name__": "__main__", "__file__": loader})
"""


def test_the_recorder_imports_no_temp_file_socket_or_digest_modules(tmp_path: Path):
    """The recorder lives as long as the job, under the job's python (a target's system python3 too): it imports the
    standard library it uses. A heartbeat's temp file needs no tempfile (nor shutil, random, bz2, lzma behind it),
    the host's name no socket, the masking rules' annotations no typing; hashlib, hmac, base64 and urllib.parse
    are for secrets, imported when the environment holds one, which is then masked as before."""
    from dfdoctor.agent import mask, ship
    from dfdoctor.run import record

    def recorded(name: str, env: dict) -> tuple[Any, set[str]]:
        seen, run_dir = tmp_path / f"{name}.json", tmp_path / name
        spec = {"argv": [sys.executable, "-c", "import os; print('step 1', os.environ.get('HF_TOKEN', ''))"],
                "run_id": name}
        p = subprocess.run([sys.executable, "-S", "-c", _RECORDER, str(seen), str(ship.AGENT_DIR), "recorder",
                            str(run_dir), "-"], input=json.dumps(spec), env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return record.load(run_dir), set(json.loads(seen.read_text()))

    plain = {k: v for k, v in os.environ.items() if not mask.name_looks_secret(k)}
    run, loaded = recorded("plain", plain)
    assert run.exit["exit_code"] == 0 and run.heartbeat["progress_lines"] == 1
    assert run.recorder["host"] == socket.gethostname()
    assert not {"tempfile", "shutil", "socket", "hashlib", "hmac", "base64", "urllib.parse", "typing"} & loaded
    secret = "hf_" + "q7Zk2LmP9xW4vR8tY3nB6cJ1"
    run, loaded = recorded("secret", dict(plain, HF_TOKEN=secret))
    assert {"base64", "urllib.parse"} <= loaded
    kept = "".join(p.read_text() for p in run.dir.iterdir() if p.is_file())
    assert secret not in kept and f"step 1 {mask.MASK}" in run.stream("stdout"), run.stream("stdout")


def test_a_command_that_reads_no_launch_line_imports_no_shell_parser(tmp_path: Path):
    """Quoting (shellquote.py) is what every target kind needs; the shell parser (shell.py, five dataclasses made
    at import, ~3 ms a start) only a command that reads a launch line: --version and report read none."""
    p, loaded = _modules(tmp_path, "--version")
    assert p.returncode == 0 and "0." in p.stdout, p.stdout + p.stderr
    assert "dfdoctor.shell" not in loaded
    p, _ = _modules(tmp_path, "check", "--only", "args.known", "--format", "json", "--output", "r.json", "--",
                    sys.executable, "-c", "pass")
    assert p.returncode == 0, p.stdout + p.stderr
    p, loaded = _modules(tmp_path, "report", "r.json", "-q")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "dfdoctor.shell" not in loaded


def test_a_plain_python_command_is_read_without_the_hop_reader_the_walk_or_the_shell_parser(tmp_path: Path):
    """`check`, `launch` and `status` of a plain `python3 -c ...`: no hops to follow (launchline/hops.py, launchpath.py:
    6 dataclasses), no launcher or `sh -c` to walk (walk.py), no shell line to parse (shell.py: 5 dataclasses)."""
    readers = {"dfdoctor.launchline.hops", "dfdoctor.launchline.launchpath", "dfdoctor.launchline.walk",
               "dfdoctor.shell"}
    p, loaded = _modules(tmp_path, "check", "--only", "log.writable", "--", sys.executable, "-c", "pass")
    assert p.returncode == 0, p.stdout + p.stderr
    assert not readers & loaded, readers & loaded
    for loaded in _quick_launch_and_its_status(tmp_path):
        assert not readers & loaded, readers & loaded
    # a launch line with a hop is still read through them (`nohup ... > log &`)
    p, loaded = _modules(tmp_path, "check", "--only", "log.writable", "--", "nohup", sys.executable, "-c", "pass")
    assert {"dfdoctor.launchline.hops", "dfdoctor.launchline.launchpath"} <= loaded, p.stdout + p.stderr


def test_a_command_that_places_no_job_makes_none_of_the_placements_answers(tmp_path: Path):
    """The placement interface (placing.py) is imported by every start; what a placement is asked and answers
    (placing_answers.py: 5 dataclasses, ~3 ms a start) only where one is made: by `launch` and `stop`, not by
    --version, `check` or `status`."""
    p, loaded = _modules(tmp_path, "--version")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "dfdoctor.placing_answers" not in loaded
    p, loaded = _modules(tmp_path, "check", "--only", "log.writable", "--", sys.executable, "-c", "pass")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "dfdoctor.placing_answers" not in loaded
    p, loaded = _modules(tmp_path, "launch", "--no-check", "--format", "json", "--", sys.executable, "-c",
                         "print('step 1')")
    report = json.loads(p.stdout)
    assert report["verdict"]["state"] == "ok", p.stdout + p.stderr
    assert "dfdoctor.placing_answers" in loaded  # the launch's ask, its Started and Judged
    p, loaded = _modules(tmp_path, "status", report["run"]["id"], "--format", "json")
    assert json.loads(p.stdout)["verdict"]["state"] == "ok", p.stdout + p.stderr
    assert "dfdoctor.placing_answers" not in loaded



@pytest.fixture(scope="module")
def full_check(tmp_path_factory) -> tuple[dict, set[str]]:
    """Every check of a plain script on this machine (probe server, a worker per check that runs), run once for
    the tests below, each asserting its own part of what the run imported."""
    tmp_path = tmp_path_factory.mktemp("full_check")
    (tmp_path / "train.py").write_text("import json\nprint('step 1')\n")
    p, loaded = _modules(tmp_path, "check", "--format", "json", "--", sys.executable, "train.py")
    report = json.loads(p.stdout)
    assert len(report["checks"]) > 5 and report["verdict"]["state"] == "ok", p.stdout + p.stderr
    return report, loaded


def test_a_check_walks_no_process_tree_with_psutil_unless_a_worker_left_one(full_check):
    """psutil's import is 0.04 G of a `check`'s 0.68 G instructions. The runner looked with it at every finished
    worker's tree (a reaped pid: no such process) and the probe server's liveness look asked it for a state
    /proc gives: a check whose workers leave no process, its probes served, imports none of it."""
    _, loaded = full_check
    assert {"dfdoctor.runner", "dfdoctor.probe_server"} <= loaded
    assert "psutil" not in loaded


def test_a_check_of_a_plain_script_reads_no_launch_line_in_its_own_process(full_check):
    """launch.path and persistence.session read a launch line (launchpath.py, hops.py, the shell parser: 11
    dataclasses) in their worker, where there is one: a check of a plain script on this machine, whose
    persistence.session does not run and whose launch.path finds no launcher, imports neither reader."""
    report, loaded = full_check
    ran = {c["id"] for c in report["checks"]}
    assert {"launch.path", "persistence.session"} <= ran
    assert {"dfdoctor.checks.launch_path", "dfdoctor.checks.persistence"} <= loaded
    assert not {"dfdoctor.launchline.hops", "dfdoctor.launchline.launchpath", "dfdoctor.shell"} & loaded


def test_a_local_check_imports_no_session_experiment(full_check):
    """persistence.session runs only on a --target (not applicable here, no worker): its experiment and the
    launch strategies (targets/persistence.py, strategies.py: 3 dataclasses) come with its run, not its module."""
    report, loaded = full_check
    assert next(c for c in report["checks"] if c["id"] == "persistence.session")["status"] == "skip"
    assert "dfdoctor.checks.persistence" in loaded
    assert not {"dfdoctor.targets.persistence", "dfdoctor.targets.strategies"} & loaded


def test_a_check_whose_imports_load_reads_no_failure_of_them(full_check):
    """imports.smoke reads a failed import with the project model's gates, the corpus of known failures, the
    traceback parser and the user's own terms (diagnose/, project/gates.py: 8 dataclasses, 31 M of a `check`'s
    600 M instructions): its module is imported before the workers fork, and a job whose imports load needs none."""
    report, loaded = full_check
    assert next(c for c in report["checks"] if c["id"] == "imports.smoke")["status"] == "ok"
    assert "dfdoctor.checks.imports_smoke" in loaded
    assert not {"dfdoctor.diagnose.known_failures", "dfdoctor.diagnose.rules_runtime", "dfdoctor.diagnose.traceback",
                "dfdoctor.diagnose.user_terms", "dfdoctor.project.gates"} & loaded


def test_a_check_without_gpus_or_a_log_reads_no_backend_slurm_step_or_named_files(full_check):
    """cuda.nccl reads the job's process-group backend and a Slurm step, log.writable the files the command
    names, only where they run: without GPUs and without --log neither does, and their modules (imported before
    the workers fork) import neither reader (19.5 M of a `check`'s 600 M instructions)."""
    report, loaded = full_check
    status = {c["id"]: c["status"] for c in report["checks"]}
    assert status["log.writable"] == "skip" and status["cuda.nccl"] == "skip", status
    assert {"dfdoctor.checks.cuda_nccl", "dfdoctor.checks.log_writable"} <= loaded
    assert not {"dfdoctor.diagnose.pg_backend", "dfdoctor.slurm.step", "dfdoctor.named_files"} & loaded
