"""--log naming a file the command names for another purpose (its script, a config, a data file): `dfdoctor launch
--log train.py -- python3 train.py` passed every check and appended the job's output to train.py. log.writable
fails it (log-not-writable) where the job runs, and no launch writes into it: not with the checks, --no-check or
--force. A log option's own value (--log-file) is the job's log: a warning, not a failure."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_dfdoctor
from dfdoctor import causes
from infra.fixtures import folder_in_container, infra  # noqa: F401
from infra.slurm_fixtures import slurm  # noqa: F401
from jobs.harness import kill_runs

SCRIPT = 'import sys\nprint("hi")\n'


def _project(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "train.yaml").write_text("lr: 0.1\n")
    (tmp_path / "data.csv").write_text("x,y\n1,2\n")
    return tmp_path


# (--log, the command, what the finding says the file is)
CASES = {
    "script": ("train.py", ["python3", "train.py"], "is the job's own script"),
    "config": ("config/train.yaml", ["python3", "train.py", "--config", "config/train.yaml"],
               "is named by the job's command (--config config/train.yaml)"),
    "config=": ("config/train.yaml", ["python3", "train.py", "--config=config/train.yaml"],
                "is named by the job's command (--config=config/train.yaml)"),
    "data": ("data.csv", ["python3", "train.py", "data.csv"], "is named by the job's command (data.csv)"),
}


def _bytes(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _check(cwd, log, command, *extra, env=None):
    p = run_dfdoctor("check", "--only", "log.writable", "--log", log, "--format", "json", *extra, "--", *command,
                     cwd=cwd, env=env)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return p.returncode, json.loads(p.stdout)["checks"][0]


def _launch(cwd, log, command, *extra, env=None):
    p = run_dfdoctor("launch", "--log", log, "--watch", "10", "--format", "json", *extra, "--", *command, cwd=cwd,
                     env=env)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_log_that_is_a_file_the_command_names_fails_and_blocks_the_launch(tmp_path, case):
    log, command, what = CASES[case]
    work = _project(tmp_path)
    before = _bytes(work)
    rc, rec = _check(work, log, command)
    assert rc == 1 and rec["status"] == "fail" and rec["cause"] == causes.LOG_NOT_WRITABLE, rec
    assert f"{what}: the job's output would be appended to it" in rec["summary"], rec["summary"]
    assert "logs/train.log" in rec["fix"] and "not tried" in rec["fix"], rec["fix"]
    rc, rep = _launch(work, log, command, "--only", "log.writable")
    v = rep["verdict"]
    assert rc == 1 and v["cause"] == causes.LOG_NOT_WRITABLE and v["summary"].startswith("Not launched"), v
    assert "--force launches anyway" not in v["evidence"], v  # --force does not pass it (below)
    assert not rep["run"].get("pid"), rep["run"]
    assert _bytes(work) == before  # no byte appended to the script, the config or the data


@pytest.mark.parametrize("how", ["--no-check", "--force"])
def test_no_launch_writes_into_the_script_not_even_unchecked_or_forced(tmp_path, how):
    """--no-check skips log.writable: the start refuses it itself; --force does not pass this blocker."""
    work = _project(tmp_path)
    before = _bytes(work)
    only = ["--only", "log.writable"] if how == "--force" else []
    rc, rep = _launch(work, "train.py", ["python3", "train.py"], how, *only)
    v = rep["verdict"]
    assert rc == 1 and v["cause"] == causes.LOG_NOT_WRITABLE and "is the job's own script" in v["summary"], v
    assert not rep["run"].get("pid"), rep["run"]
    assert _bytes(work) == before


def test_the_module_a_job_runs_is_never_its_log_with_the_checks_or_without(tmp_path):
    """`python3 -m mod` runs mod.py, which no argv word names as a path: the check and the unchecked start both
    read the module file from the parsed line (`launch --no-check` read the argv words alone and appended to it)."""
    work = _project(tmp_path)
    (work / "mod.py").write_text(SCRIPT)
    before = _bytes(work)
    rc, rec = _check(work, "mod.py", ["python3", "-m", "mod"])
    assert rc == 1 and rec["cause"] == causes.LOG_NOT_WRITABLE and "is the module the job runs" in rec["summary"]
    rc, rep = _launch(work, "mod.py", ["python3", "-m", "mod"], "--no-check")
    v = rep["verdict"]
    assert rc == 1 and v["cause"] == causes.LOG_NOT_WRITABLE and "is the module the job runs" in v["summary"], v
    assert _bytes(work) == before


def test_a_link_to_the_script_is_the_script(tmp_path):
    """Judged by device and inode, not by name: a hard link and a symlink to train.py are train.py."""
    work = _project(tmp_path)
    os.link(work / "train.py", work / "hard.log")
    (work / "soft.log").symlink_to("train.py")
    before = _bytes(work)
    for log in ("hard.log", "soft.log"):
        rc, rec = _check(work, log, ["python3", "train.py"])
        assert rc == 1 and rec["cause"] == causes.LOG_NOT_WRITABLE and "is the job's own script" in rec["summary"]
        rc, rep = _launch(work, log, ["python3", "train.py"], "--no-check")
        assert rc == 1 and rep["verdict"]["cause"] == causes.LOG_NOT_WRITABLE, rep["verdict"]
    assert _bytes(work) == before


# (the shell, the line it runs, --log, what the refusal says the file is)
SHELL_CASES = {
    "bash -c config": ("bash", "python3 train.py --config config/train.yaml", "config/train.yaml",
                       "is named by the job's command (--config config/train.yaml)"),
    "sh -c data": ("sh", "python3 train.py data.csv; echo done", "data.csv", "is named by the job's command (data.csv)"),
    "bash -lc config=": ("bash", "X=1 python3 -u train.py --config=config/train.yaml 2>&1", "config/train.yaml",
                         "is named by the job's command (--config=config/train.yaml)"),
}


@pytest.mark.parametrize("case", sorted(SHELL_CASES))
def test_a_file_named_inside_a_shell_line_is_never_its_log(tmp_path, case):
    """`launch --log config/train.yaml -- bash -c "python3 train.py --config config/train.yaml"`: a launch runs
    the line as typed, and only the line's script was read out of it, so the config passed every check and got the
    job's `hi` appended (checked or --no-check). The words inside the line are the command's too now."""
    shell, line, log, what = SHELL_CASES[case]
    work = _project(tmp_path)
    before = _bytes(work)
    command = [shell, "-lc" if "-lc" in case else "-c", line]
    for how in (["--only", "log.writable"], ["--no-check"]):
        rc, rep = _launch(work, log, command, *how)
        v = rep["verdict"]
        assert rc == 1 and v["cause"] == causes.LOG_NOT_WRITABLE and what in v["summary"], (how, v)
        assert not rep["run"].get("pid"), rep["run"]
        assert _bytes(work) == before, how  # not one byte appended to the config or the data


def test_a_shell_lines_own_redirect_and_a_folder_it_moves_to_are_not_named(tmp_path):
    """Conservative: the file a line's `>` writes, or its job's --log-file, is the job's own log (two writers, as
    before: launched), and a relative word after `cd` names a file of another folder (config/train.yaml there is
    not ours: launched)."""
    work = _project(tmp_path)
    (work / "own.log").write_text("earlier run\n")
    for line, log in (("python3 -u train.py > out.log", "out.log"), ("python3 -u train.py --log-file own.log", "own.log")):
        rc, rep = _launch(work, log, ["bash", "-c", line], "--only", "log.writable")
        v = rep["verdict"]
        assert rc == 0 and rep["run"].get("pid") and v["cause"] != causes.LOG_NOT_WRITABLE, (line, v)
    (work / "sub").mkdir()
    (work / "sub" / "train.py").write_text(SCRIPT)
    rc, rep = _launch(work, "config/train.yaml", ["bash", "-c", "cd sub && python3 train.py --config config/train.yaml"],
                      "--only", "log.writable")
    assert rc == 0 and rep["run"].get("pid"), rep["verdict"]


def test_a_program_found_on_path_is_never_its_log(tmp_path):
    """`launch --log ~/bin/run.sh -- run.sh`: the shell runs the run.sh PATH finds, not ./run.sh; it was not
    named, and the job's output was appended to the user's own program (checked or --no-check)."""
    (tmp_path / "work").mkdir()
    work = _project(tmp_path / "work")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "run.sh"
    program.write_text("#!/bin/sh\necho hi\n")
    program.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    before = program.read_bytes()
    for how in (["--only", "log.writable"], ["--no-check"]):
        rc, rep = _launch(work, str(program), ["run.sh"], *how, env=env)
        v = rep["verdict"]
        assert rc == 1 and v["cause"] == causes.LOG_NOT_WRITABLE and "is the job's own program" in v["summary"], v
        assert not rep["run"].get("pid"), rep["run"]
        assert program.read_bytes() == before, how


def test_the_jobs_own_log_option_warns_and_launches(tmp_path):
    """--log-file train.log: the job writes its log there itself, so it is no other purpose; two writers share
    the file (a warning), and the launch goes on."""
    work = _project(tmp_path)
    (work / "train.log").write_text("earlier run\n")
    for command in (["python3", "train.py", "--log-file", "train.log"], ["python3", "train.py", "--logfile=train.log"]):
        rc, rec = _check(work, "train.log", command)
        assert rc == 0 and rec["status"] == "warn" and "is also the job's own log" in rec["summary"], rec
        assert "interleave" in rec["summary"], rec
    rc, rep = _launch(work, "train.log", ["python3", "-u", "train.py", "--log-file", "train.log"],
                      "--only", "log.writable")
    assert rep["run"].get("pid") and rep["verdict"]["cause"] != causes.LOG_NOT_WRITABLE, rep["verdict"]
    assert (work / "train.log").read_text().startswith("earlier run\nhi"), (work / "train.log").read_text()


@pytest.mark.parametrize("existing", [False, True])
def test_a_log_of_its_own_passes_as_before(tmp_path, existing):
    work = _project(tmp_path)
    if existing:
        (work / "train.log").write_text("earlier run\n")
    before = _bytes(work)
    rc, rec = _check(work, "train.log", ["python3", "train.py", "--config", "config/train.yaml", "data.csv"])
    assert rc == 0 and rec["status"] == "ok" and "can be written" in rec["summary"], rec
    assert _bytes(work) == before  # the check itself writes nothing


def test_on_a_pct_target_the_file_is_judged_there(infra, tmp_path):  # noqa: F811
    """In the container behind `pct exec`: its script is judged by its inode there (a hard link of it as the
    log), nothing is launched, with --force either, and the script is unchanged."""
    with folder_in_container(infra, tmp_path, "log-is-input-") as box:
        (box.host_side / "train.py").write_text(SCRIPT)
        os.link(box.host_side / "train.py", box.host_side / "out.log")
        command = ["python3", f"{box.inside}/train.py"]
        rc, rec = _check(box.local, f"{box.inside}/out.log", command, "--target", infra.pct_target, env=box.env)
        assert rc == 1 and rec["cause"] == causes.LOG_NOT_WRITABLE and "is the job's own script" in rec["summary"]
        assert "in container" in rec["evidence"][0], rec["evidence"]
        rc, rep = _launch(box.local, f"{box.inside}/out.log", command, "--target", infra.pct_target,
                          "--only", "log.writable", env=box.env)
        assert rc == 1 and rep["verdict"]["cause"] == causes.LOG_NOT_WRITABLE, rep["verdict"]
        # --force there: the gate stops it (the recorder there would too: below)
        rc, rep = _launch(box.local, f"{box.inside}/out.log", command, "--target", infra.pct_target, "--force",
                          "--only", "log.writable", env=box.env)
        assert rc == 1 and rep["verdict"]["cause"] == causes.LOG_NOT_WRITABLE, rep["verdict"]
        assert not rep["run"].get("pid"), rep["run"]
        assert (box.host_side / "train.py").read_text() == SCRIPT


# ---- a --target's unchecked start: the recorder there compares the files before it opens the log ---------------
@dataclass
class There:
    """A job's folder on a real target: the target, the folder as the job sees it (`inside`) and as this test
    writes it (`host_side`), and a local folder and environment for dfdoctor."""

    target: str
    inside: str
    host_side: Path
    local: Path
    env: dict


@pytest.fixture(params=["pct", "ssh"])
def there(request, infra, tmp_path):  # noqa: F811
    """The LXC container behind the `pct` shim (other mount namespace: its paths are not this machine's), or this
    machine behind sshd; a project of its own there either way."""
    if request.param == "ssh":
        folder, local = tmp_path / "there", tmp_path / "here"
        folder.mkdir()
        local.mkdir()
        yield There(infra.ssh_target, str(_project(folder)), folder, local,
                    dict(infra.env(), XDG_CACHE_HOME=str(tmp_path / "cache")))
        kill_runs(folder)
        return
    with folder_in_container(infra, tmp_path, "log-is-input-") as box:
        _project(box.host_side)
        yield There(infra.pct_target, box.inside, box.host_side, box.local, box.env)


def _launch_there(f: There, log, command, *extra):
    """`launch --target T --no-check --cwd FOLDER --log LOG -- COMMAND`: the log and the command's words relative
    to the job's folder there, as a user types them."""
    return _launch(f.local, log, command, "--target", f.target, "--cwd", f.inside, "--no-check", *extra, env=f.env)


@pytest.mark.parametrize("case", ["script", "config"])
def test_an_unchecked_launch_there_never_writes_into_a_file_the_command_names(there, tmp_path, case):
    """`launch --target T --no-check --log train.py -- python3 train.py` (or the --config file as the log):
    nothing checked the log, and the recorder there appended the job's output to it. It refuses there now, before
    the job starts, with the words, cause and exit status of the same refusal here."""
    log, command, what = CASES[case]
    files = sorted(p.relative_to(there.host_side) for p in there.host_side.rglob("*") if p.is_file())
    before = {p: (there.host_side / p).read_bytes() for p in files}
    rc, rep = _launch_there(there, log, command)
    v = rep["verdict"]
    assert rc == 1 and v["cause"] == causes.LOG_NOT_WRITABLE, v
    assert v["summary"] == f"Not launched: {there.inside}/{log} {what}: the job's output would be appended to it.", v
    assert not rep["run"].get("pid"), rep["run"]
    assert {p: (there.host_side / p).read_bytes() for p in files} == before  # not one byte appended
    (tmp_path / "local").mkdir()
    here = _project(tmp_path / "local")  # the same refusal of an unchecked launch on this machine: the same words
    rc_here, rep_here = _launch(here, log, command, "--no-check")
    assert rc_here == rc and _words(rep_here["verdict"], str(here)) == _words(v, there.inside), (rep_here, v)


def _words(verdict, folder):
    """A verdict's cause and words, its job's folder written FOLDER."""
    return json.dumps([verdict[k] for k in ("state", "cause", "summary", "fix", "evidence")]).replace(folder, "FOLDER")


@pytest.mark.parametrize("there", ["pct"], indirect=True)  # the recorder's look is the same behind ssh: above
def test_a_link_there_to_the_script_is_the_script(there):
    """Judged there by device and inode: a symlink to train.py, named by its absolute path there (in the
    container's own file system), is train.py."""
    (there.host_side / "soft.log").symlink_to("train.py")
    rc, rep = _launch_there(there, f"{there.inside}/soft.log", ["python3", "train.py"])
    assert rc == 1 and rep["verdict"]["cause"] == causes.LOG_NOT_WRITABLE, rep["verdict"]
    assert "is the job's own script" in rep["verdict"]["summary"], rep["verdict"]
    assert (there.host_side / "train.py").read_text() == SCRIPT


@pytest.mark.parametrize("there", ["pct"], indirect=True)
def test_a_log_of_its_own_there_launches_fresh_and_existing(there):
    """The recorder's new look refuses only a file the command names: a log that does not exist yet is created
    and written, and the next launch appends to it; the job's own log option's value is not another purpose."""
    for _ in range(2):  # the first creates the log, the second appends to the existing log
        rc, rep = _launch_there(there, "train.log", ["python3", "-u", "train.py", "--log-file", "train.log"])
        assert rep["run"].get("pid") and rep["verdict"]["cause"] != causes.LOG_NOT_WRITABLE, rep["verdict"]
    assert (there.host_side / "train.log").read_text() == "hi\nhi\n"


def test_the_log_probes_comparison_and_the_agents_give_one_answer(tmp_path):
    """The log probe keeps its own copy of the comparison (it cannot import the agent's package where it runs):
    both say the same of the file itself, a hard link, a symlink, another file, a missing path and a folder."""
    import importlib.util
    import sys

    from dfdoctor.agent.same_file import same_file
    from dfdoctor.checks import probes

    folder = os.path.dirname(probes.__file__)
    sys.path.insert(0, folder)  # the probe imports its helpers beside it, as where it runs
    try:
        spec = importlib.util.spec_from_file_location("log_probe_under_test", os.path.join(folder, "log_probe.py"))
        probe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe)
    finally:
        sys.path.remove(folder)
    work = _project(tmp_path)
    os.link(work / "train.py", work / "hard.log")
    (work / "soft.log").symlink_to("train.py")
    paths = [str(work / n) for n in ("train.py", "hard.log", "soft.log", "data.csv", "missing.py", "config")]
    for log in ("train.py", "hard.log", "soft.log", "data.csv", "missing.log", "config"):
        assert probe._same_as(str(work / log), paths) == same_file(str(work / log), paths), log
    assert same_file(str(work / "soft.log"), paths) == [0, 1, 2]
    assert same_file(str(work / "missing.log"), paths) == []


# ---- sbatch: Slurm writes the job's output where --output/--error say (dfdoctor's --log is not used there) ------
# (sbatch's option, its value, what the refusal says the file is)
SBATCH_CASES = {
    "script": ("-o", "train.py", "is the job's own script"),
    "batch script": ("-o", "job.sbatch", "is the job's own script"),
    "%x": ("-o", "%x.py", "is the job's own script"),  # -J train: the file Slurm opens is train.py
    "config": ("-e", "config/train.yaml", "is named by the job's command (--config config/train.yaml)"),
}


@pytest.mark.parametrize("case", sorted(SBATCH_CASES))
def test_an_sbatch_output_that_is_a_file_the_job_names_is_never_submitted(slurm, tmp_path, case):  # noqa: F811
    """slurmstepd opens --output truncated before the batch script runs: `launch -- sbatch -o train.py` emptied
    train.py, ran the empty script and said OK, checked, --no-check or --force (the real single-node Slurm).
    Refused before the submission instead, in the words, cause and exit code of a local --log, and no byte of the
    project changes. slurm.output fails it as log.writable fails a local --log; the start refuses it unchecked."""
    option, value, what = SBATCH_CASES[case]
    work = _project(tmp_path)
    (work / "job.sbatch").write_text("#!/bin/bash\npython3 train.py --config config/train.yaml\n")
    before = _bytes(work)
    line = ["--", "sbatch", "-J", "train", option, value, "job.sbatch"]
    p = run_dfdoctor("check", "--only", "slurm.output", "--format", "json", *line, cwd=work, timeout=200)
    rec = json.loads(p.stdout)["checks"][0]
    assert p.returncode == 1 and rec["status"] == "fail" and rec["cause"] == causes.LOG_NOT_WRITABLE, rec
    assert f"{what}: Slurm would write the job's output over it" in rec["summary"], rec["summary"]
    for how, words in ((["--only", "slurm.*"], "Not submitted: slurm.output found"), (["--no-check"], "Not launched"),
                       (["--force", "--only", "slurm.*"], "Not submitted: slurm.output found")):
        p = run_dfdoctor("launch", "--watch", "20", "--format", "json", *how, *line, cwd=work, timeout=200)
        assert p.returncode in (0, 1), p.stdout + p.stderr
        rep = json.loads(p.stdout)
        v = rep["verdict"]
        assert p.returncode == 1 and v["cause"] == causes.LOG_NOT_WRITABLE, (how, v)
        assert v["summary"].startswith(words) and what in v["summary"], (how, v["summary"])
        assert "--force submits anyway" not in json.dumps(v), v  # --force does not pass it
        assert not rep["run"].get("slurm") and not rep["run"].get("dir"), rep["run"]  # nothing submitted
        assert _bytes(work) == before, how  # the script, the batch script and the config as they were


# ---- a --log that the launch never opens: Slurm writes where sbatch says, Ray keeps the output in its logs -------
def _unused_log_row(doc):
    """The warning row that says --log is not used (log.writable), or None."""
    rows = [c for c in doc["checks"] if c["id"] == "log.writable" and "is not used" in c["summary"]]
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


def test_a_log_slurm_never_opens_is_said_with_where_the_output_goes(slurm, tmp_path):  # noqa: F811
    """`launch --log train.log -- sbatch job.sbatch` (the real single-node Slurm): Slurm writes the job's output
    to slurm-%j.out (or sbatch's --output), and --log was silently ignored: the user waited for a train.log that
    never appeared. A warning row says so, with the file itself once Slurm named it; never a failure (the job is
    fine: exit 0), and `check --fail-on warn` alone makes it count."""
    work = _project(tmp_path)
    (work / "job.sbatch").write_text("#!/bin/bash\necho hi\n")
    line = ["--", "sbatch", "job.sbatch"]
    p = run_dfdoctor("check", "--only", "slurm.submission", "--log", "train.log", "--format", "json", *line, cwd=work,
                     timeout=200)
    row = _unused_log_row(json.loads(p.stdout))
    assert p.returncode == 0 and row and row["status"] == "warn" and row["cause"] is None, p.stdout
    assert row["summary"] == (f"--log {work}/train.log is not used: Slurm writes the job's output to slurm-%j.out in "
                              f"the submit folder {work} (%j: the job id), as sbatch does without --output"), row
    assert "sbatch --output" in row["fix"], row
    p = run_dfdoctor("check", "--only", "slurm.submission", "--log", "train.log", "--fail-on", "warn", *line, cwd=work,
                     timeout=200)
    assert p.returncode == 1 and "is not used" in p.stdout, p.stdout
    for how, option in ((["--only", "slurm.submission"], []), (["--no-check"], ["-o", "out-%j.txt"])):
        p = run_dfdoctor("launch", "--watch", "30", "--log", "train.log", "--format", "json", *how, "--",
                         "sbatch", *option, "job.sbatch", cwd=work, timeout=200)
        doc = json.loads(p.stdout)
        job = doc["run"]["slurm"]["job_id"]
        out = work / (f"out-{job}.txt" if option else f"slurm-{job}.out")
        row = _unused_log_row(doc)
        assert p.returncode == 0 and doc["verdict"]["state"] == "ok", (how, doc["verdict"])
        assert row and row["status"] == "warn", (how, doc["checks"])
        assert row["summary"] == f"--log {work}/train.log is not used: Slurm writes the job's output to {out}", row
        assert out.read_text() == "hi\n" and not (work / "train.log").exists(), how
    p = run_dfdoctor("check", "--only", "slurm.submission", "--skip", "log.writable", "--log", "train.log",
                     "--format", "json", *line, cwd=work, timeout=200)
    assert p.returncode == 0 and _unused_log_row(json.loads(p.stdout)) is None, p.stdout  # --skip silences it


def test_a_log_ray_never_opens_is_said_with_how_to_read_the_output(tmp_path):
    """`ray job submit` keeps the driver's output in Ray's logs (observed on the real head of
    tests/support/ray_head.py): --log is never opened. Reached without a head: `check` with no Ray check selected
    and a launch whose submission fails (no head at that address) say it as a warning row only; the id a
    submitted job gets in the wording is read from the launch's run object (unit level: a head costs ~50 CPU-s)."""
    from dfdoctor.engine import build_context
    from dfdoctor.ray.placement import RAY
    from dfdoctor.unused_log import records

    work = _project(tmp_path)
    line = ["ray", "job", "submit", "--address", "http://127.0.0.1:9", "--submission-id", "mine", "--",
            "python3", "train.py"]
    logs = "`ray job logs mine --address http://127.0.0.1:9`"
    p = run_dfdoctor("check", "--only", "no.ray.check", "--log", "train.log", "--format", "json", "--", *line,
                     cwd=work)
    row = _unused_log_row(json.loads(p.stdout))
    assert p.returncode == 0 and row and row["status"] == "warn", p.stdout
    assert row["summary"] == (f"--log {work}/train.log is not used: Ray keeps the job's output in its own logs; "
                              f"{logs} shows it"), row
    rc, doc = _launch(work, "train.log", line, "--no-check")
    assert rc == 1 and doc["verdict"]["summary"].startswith("`ray job submit` did not submit"), doc["verdict"]
    assert _unused_log_row(doc)["summary"] == row["summary"] and not (work / "train.log").exists(), doc["checks"]
    ctx, _ = build_context({"log": "train.log", "cwd": str(work)}, line[:5] + line[7:])  # no --submission-id
    [rec] = records(RAY, ctx, run={"ray": {"job_id": "dfdoctor-20261207-1"}})
    assert "`ray job logs dfdoctor-20261207-1 --address http://127.0.0.1:9` shows it" in rec.summary, rec.summary
    assert rec.status.value == "warn" and rec.cause is None
