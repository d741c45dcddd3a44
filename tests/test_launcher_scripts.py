"""Launcher scripts of the shapes people write, each checked and launched for real.

Every script here is written the way a user writes one (not built from tests/jobs): a project folder with a
tiny `train.py` that prints where it runs and with which interpreter, and a shell launcher in front of it.
`dfdoctor check` must not fail on a launcher it cannot follow, and `dfdoctor launch` must start every one of
them and name the outcome; only a failure dfdoctor observed (a path that, fully resolved, is not there) may
stop a launch.

What `check` says is read in the launch's own report where the launch is given no --log (the job's output is then
its run folder's stdout.log): its pre-launch checks are then `check`'s (engine.run_phase, "pre", the same records in
its "checks"), and `check`'s exit is 1 exactly when one of them is a problem (engine.exit_code). A `dfdoctor check`
before each launch ran them all a second time (~1 CPU-s a test, measured). `check` itself still runs where what it
does apart from a launch is the point (test_oldpwd_after_cd: it creates nothing; test_variables_with_defaults: its
exit 1), and beside the launches that keep their --log, whose pre-launch checks then read the log too
(test_cd_then_relative_path: launch.path fails the line's log, which goes to the terminal, and the launch starts it
all the same; test_exec_with_a_redirect: the log is the one the script writes).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Optional

import pytest

pytestmark = pytest.mark.slow  # each test checks and launches for real (a few seconds each)

DFDOCTOR = str(Path(sys.executable).parent / "dfdoctor")
TRAIN = """\
import os, sys
print(f"start cwd={os.getcwd()} python={sys.executable} steps={os.environ.get('STEPS', '-')} args={sys.argv[1:]}",
      flush=True)
for step in range(3):
    print(f"step {step}", flush=True)
print("done", flush=True)
"""


def user_env(**extra: str) -> dict[str, str]:
    """The environment a user's terminal gives dfdoctor (without this machine's PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "VIRTUAL_ENV")}
    env.update(NO_COLOR="1", **extra)
    return env


def write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
    return path


def run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    """Run dfdoctor with a JSON report beside; return the process and the report."""
    out = cwd / f".report-{time.monotonic_ns()}.json"
    cmd_at = args.index("--")
    argv = [DFDOCTOR, *args[:cmd_at], "--format", "json", "--output", str(out), "--format", "text", *args[cmd_at:]]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"no report; rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc, json.loads(out.read_text())


def check(cwd: Path, *command: str, env: Optional[dict] = None) -> tuple[subprocess.CompletedProcess, dict]:
    return run(["check", "--cwd", str(cwd), "--", *command], cwd, env or user_env())


def launch(cwd: Path, *command: str, env: Optional[dict] = None, log: Optional[str] = "train.log",
           watch: float = 15) -> tuple[subprocess.CompletedProcess, dict]:
    opts = ["launch", "--cwd", str(cwd), "--watch", str(watch)] + (["--log", str(cwd / log)] if log else [])
    proc, rep = run([*opts, "--", *command], cwd, env or user_env())
    _reap(rep)
    return proc, rep


def _reap(rep: dict) -> None:
    """The jobs here end by themselves; should one still run, stop its process group."""
    pid = (rep.get("run") or {}).get("pid")
    if pid:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def smoke(rep: dict) -> dict:
    return next(c for c in rep["checks"] if c["id"] == "imports.smoke")


def check_passed(rep: dict) -> bool:
    """What `check`'s exit 0 says, read in a launch's report: no pre-launch record is a problem."""
    return not [c for c in rep["checks"] if c["phase"] == "pre" and c["status"] in ("fail", "error", "timeout")
                and not c.get("silenced")]


def job_output(rep: dict) -> str:
    """What the job printed, as a launch without --log keeps it in its run folder."""
    return (Path(rep["run"]["dir"]) / "stdout.log").read_text()


def completed(proc: subprocess.CompletedProcess, rep: dict) -> None:
    """The launch started the job and it ran to the end."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rep["verdict"]["state"] == "ok", rep["verdict"]
    assert rep["run"]["exit_code"] == 0


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """A user's project: train.py in src/, a data folder, nothing else."""
    p = tmp_path / "proj"
    write(p / "src" / "train.py", TRAIN)
    (p / "data").mkdir()
    return p


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """The folder the user happens to be in when launching."""
    d = tmp_path / "home" / "user"
    d.mkdir(parents=True)
    return d


def test_cd_then_relative_path(proj: Path) -> None:
    write(proj / "run.sh", """\
        #!/bin/sh
        cd src
        python3 train.py --epochs 1
    """, executable=True)
    proc, rep = check(proj, "./run.sh")
    assert proc.returncode == 0 and smoke(rep)["status"] == "ok", proc.stdout
    assert "src/train.py" in smoke(rep)["summary"]
    proc, rep = launch(proj, "./run.sh")
    completed(proc, rep)
    assert f"start cwd={proj / 'src'}" in (proj / "train.log").read_text()


def test_cd_to_the_scripts_own_folder(proj: Path, elsewhere: Path) -> None:
    write(proj / "scripts" / "train.sh", """\
        #!/bin/bash
        set -euo pipefail
        cd "$(dirname "$0")/.."
        python3 -u src/train.py "$@"
    """, executable=True)
    proc, rep = launch(elsewhere, "bash", str(proj / "scripts" / "train.sh"), "--lr", "0.1", log=None)
    assert check_passed(rep) and smoke(rep)["status"] == "ok", proc.stdout
    completed(proc, rep)
    log = job_output(rep)
    assert f"start cwd={proj} " in log and "args=['--lr', '0.1']" in log


def test_venv_activate(proj: Path, tmp_path: Path) -> None:
    venv = proj / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    write(proj / "train.sh", """\
        #!/usr/bin/env bash
        source .venv/bin/activate
        exec python src/train.py
    """, executable=True)
    proc, rep = launch(proj, "./train.sh", log=None)
    assert check_passed(rep), proc.stdout
    assert smoke(rep)["data"]["launch"]["python"] == str(venv / "bin" / "python")
    completed(proc, rep)
    assert f"python={venv / 'bin' / 'python'}" in job_output(rep)


def test_source_dotenv(proj: Path) -> None:
    write(proj / ".env", """\
        # settings for this machine
        DATA_DIR=data
        export STEPS=3
        WORKDIR=src
    """)
    write(proj / "launch.sh", """\
        #!/bin/bash
        if [ -f .env ]; then
            source .env
        fi
        cd "$WORKDIR" || exit 1
        python3 train.py --data "../$DATA_DIR"
    """)
    proc, rep = launch(proj, "bash", "launch.sh", log=None)
    assert check_passed(rep) and smoke(rep)["status"] == "ok", proc.stdout
    completed(proc, rep)
    log = job_output(rep)
    assert f"start cwd={proj / 'src'}" in log and "steps=3" in log and "'../data'" in log


def test_variables_with_defaults(proj: Path) -> None:
    write(proj / "run.sh", """\
        #!/bin/sh
        ENTRY=${ENTRY:-src/train.py}
        OUT_DIR="${OUT_DIR:-./out}"
        mkdir -p "$OUT_DIR"
        python3 "$ENTRY" --out "$OUT_DIR" --bs "${BS:-8}"
    """)
    proc, rep = launch(proj, "sh", "run.sh", log=None)
    assert check_passed(rep) and smoke(rep)["status"] == "ok", proc.stdout
    completed(proc, rep)
    assert "args=['--out', './out', '--bs', '8']" in job_output(rep)
    # the caller's own value wins over the default, as in the shell: a missing entry is then a real finding
    proc, rep = check(proj, "sh", "run.sh", env=user_env(ENTRY="src/nope.py"))
    assert proc.returncode == 1 and smoke(rep)["cause"] == "command-not-found"
    assert str(proj / "src" / "nope.py") in smoke(rep)["summary"]


def test_exec_with_a_redirect(proj: Path) -> None:
    (proj / "logs").mkdir()
    write(proj / "start.sh", """\
        #!/bin/bash
        cd "$(dirname "${BASH_SOURCE[0]}")"
        exec python3 -u src/train.py > logs/train.log 2>&1
    """, executable=True)
    proc, rep = check(proj, "./start.sh")
    assert proc.returncode == 0 and smoke(rep)["status"] == "ok", proc.stdout
    proc, rep = launch(proj, "./start.sh", log="logs/train.log")
    completed(proc, rep)
    assert "done" in (proj / "logs" / "train.log").read_text()


def test_exec_without_a_redirect(proj: Path) -> None:
    write(proj / "go.sh", """\
        #!/bin/sh
        cd "${0%/*}"/src
        exec python3 train.py "$@"
    """, executable=True)
    proc, rep = launch(proj, str(proj / "go.sh"), "x", log=None)
    assert check_passed(rep) and smoke(rep)["status"] == "ok", proc.stdout
    completed(proc, rep)
    assert "args=['x']" in job_output(rep)


def test_conda_run(proj: Path, tmp_path: Path) -> None:
    """conda is not installable here: a `conda` script on PATH does what `conda run -n ENV` does (puts the
    environment's bin/ first on PATH and runs the command), over a real environment folder."""
    home = tmp_path / "condahome"
    env_bin = home / "miniconda3" / "envs" / "drafter" / "bin"
    env_bin.mkdir(parents=True)
    (env_bin / "python").symlink_to(sys.executable)
    write(home / "miniconda3" / "bin" / "conda", """\
        #!/bin/sh
        [ "$1" = run ] || exit 2
        shift
        while [ $# -gt 0 ]; do
            case "$1" in
                -n|--name) name=$2; shift 2 ;;
                --no-capture-output|--live-stream) shift ;;
                *) break ;;
            esac
        done
        PATH="$HOME/miniconda3/envs/$name/bin:$PATH" exec "$@"
    """, executable=True)
    write(proj / "train_conda.sh", """\
        #!/bin/bash
        conda run -n drafter --no-capture-output python src/train.py --conda
    """)
    env = user_env(HOME=str(home), PATH=f"{home / 'miniconda3' / 'bin'}:{os.environ['PATH']}")
    proc, rep = launch(proj, "bash", "train_conda.sh", env=env, log=None)
    assert check_passed(rep) and smoke(rep)["status"] == "ok", proc.stdout
    assert smoke(rep)["data"]["launch"]["python"] == str(env_bin / "python")
    completed(proc, rep)
    assert f"python={env_bin / 'python'}" in job_output(rep)


def test_a_wrapper_calling_a_wrapper(proj: Path, elsewhere: Path) -> None:
    write(proj / "tools" / "inner.sh", """\
        #!/bin/bash
        cd "${BASH_SOURCE%/*}/../src"
        python3 train.py "$@"
    """, executable=True)
    write(proj / "outer.sh", """\
        #!/bin/bash
        export STEPS=${STEPS:-7}
        HERE="$(cd "$(dirname "$0")" && pwd)"
        exec "$HERE/tools/inner.sh" --from-outer "$@"
    """, executable=True)
    proc, rep = launch(elsewhere, str(proj / "outer.sh"), "--x", log=None)
    assert check_passed(rep) and smoke(rep)["status"] == "ok", proc.stdout
    completed(proc, rep)
    log = job_output(rep)
    assert f"start cwd={proj / 'src'}" in log and "steps=7" in log and "args=['--from-outer', '--x']" in log


def test_oldpwd_after_cd(proj: Path, tmp_path: Path) -> None:
    """Issue #12: `cd` sets OLDPWD; dfdoctor's own OLDPWD must not stand in for it."""
    scratch = tmp_path / "x"
    write(proj / "run.sh", f"mkdir -p {scratch} && cd {scratch} && exec python3 \"$OLDPWD/src/train.py\"\n")
    env = user_env(OLDPWD="/")
    proc, rep = check(proj, "sh", "run.sh", env=env)  # the folder the script makes is not there yet
    assert proc.returncode == 0 and smoke(rep)["status"] == "ok", proc.stdout
    assert not scratch.exists(), "a check must not create what the launcher creates"
    proc, rep = launch(proj, "sh", "run.sh", env=env)
    completed(proc, rep)
    assert f"start cwd={scratch}" in (proj / "train.log").read_text()
    assert subprocess.run(["sh", "run.sh"], cwd=proj, capture_output=True, timeout=60).returncode == 0


def test_a_path_it_cannot_resolve_warns_and_launch_starts_it(proj: Path) -> None:
    """$OLDPWD before any `cd` is the caller's: dfdoctor names the word and does not guess; the job runs."""
    write(proj / "run.sh", 'exec python3 "$OLDPWD/src/train.py"\n')
    env = user_env(OLDPWD=str(proj))  # the user's shell came from the project folder
    proc, rep = launch(proj, "sh", "run.sh", env=env, log=None)
    s = smoke(rep)
    assert check_passed(rep), proc.stdout
    assert s["status"] == "warn" and s["basis"] == "static" and s["cause"] is None
    assert '"$OLDPWD/src/train.py"' in s["summary"] and "OLDPWD" in " ".join(s["evidence"])
    completed(proc, rep)


def test_a_resolved_path_that_is_not_there_still_blocks(proj: Path) -> None:
    """The observed failure keeps its verdict: every word resolved, the file is not there."""
    write(proj / "run.sh", "cd src && python3 trian.py\n")
    proc, rep = launch(proj, "sh", "run.sh", log=None)
    assert not check_passed(rep) and smoke(rep)["cause"] == "command-not-found"
    assert smoke(rep)["basis"] == "observed"
    assert proc.returncode == 1 and rep["verdict"]["cause"] == "command-not-found"
    assert rep["run"]["pid"] is None and "trian.py" in rep["verdict"]["summary"]


def test_redirect_into_a_missing_folder_is_named_when_launched(proj: Path) -> None:
    """`exec ... > logs/train.log` without logs/: the shell cannot open the file and the job never starts."""
    write(proj / "start.sh", "#!/bin/sh\nexec python3 src/train.py > logs/train.log 2>&1\n", executable=True)
    proc, rep = launch(proj, "./start.sh", log=None)
    assert rep["verdict"]["state"] == "failed", rep["verdict"]
    assert "logs/train.log" in json.dumps(rep["verdict"])
