"""The launch-command parser: what `python`, `torchrun`, `accelerate` and shell launchers would run."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from dfdoctor.launchline.commandline import parse, parse_launcher

PY = str(Path(sys.executable))


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """A project folder with train.py and a bin/ on PATH holding python3, torchrun and accelerate."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(PY)
    for name, body in (("torchrun", "from torch.distributed.run import main\n"),
                       ("accelerate", "from accelerate.commands.accelerate_cli import main\n")):
        p = bindir / name
        p.write_text(f"#!{PY}\n{body}")
        p.chmod(0o755)
    return tmp_path


def env_for(proj: Path, **extra: str) -> dict[str, str]:
    """A clean environment whose PATH finds only the project's bin/ and the system."""
    return {"PATH": f"{proj / 'bin'}:/usr/bin:/bin", "HOME": str(proj), **extra}


def write_exec(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_plain_python_script(proj: Path) -> None:
    s = parse(["python3", "train.py", "--lr", "0.1"], proj, env_for(proj))
    assert s.runner == "python"
    assert s.python == str(proj / "bin" / "python3")
    assert s.script == proj / "train.py"
    assert s.script_args == ["--lr", "0.1"]
    assert s.exists and s.problem is None
    assert not s.unbuffered


def test_unbuffered_flag_and_clusters(proj: Path) -> None:
    assert parse(["python3", "-u", "train.py"], proj, env_for(proj)).unbuffered
    s = parse(["python3", "-W", "ignore", "-X", "dev", "-Bu", "train.py", "-u"], proj, env_for(proj))
    assert s.unbuffered and s.script == proj / "train.py" and s.script_args == ["-u"]
    assert parse(["python3", "train.py"], proj, env_for(proj, PYTHONUNBUFFERED="1")).unbuffered
    # `-u` after the script belongs to the script, not to Python
    assert not parse(["python3", "train.py", "-u"], proj, env_for(proj)).unbuffered


def test_module_with_absolute_interpreter(proj: Path) -> None:
    s = parse([PY, "-m", "pkg.mod", "--x", "1"], proj, env_for(proj))
    assert (s.runner, s.python, s.module, s.script, s.script_args) == ("python", PY, "pkg.mod", None, ["--x", "1"])
    glued = parse([PY, "-mpkg.mod"], proj, env_for(proj))
    assert glued.module == "pkg.mod"


def test_dash_c(proj: Path) -> None:
    s = parse(["python3", "-c", "import torch", "a"], proj, env_for(proj))
    assert s.code == "import torch" and s.script is None and s.module is None and s.script_args == ["a"]


def test_torchrun_options_and_interpreter_from_shebang(proj: Path) -> None:
    s = parse(["torchrun", "--nproc_per_node", "4", "--standalone", "--master_port=29500", "train.py", "--bs", "8"],
              proj, env_for(proj))
    assert s.runner == "torchrun"
    assert s.python == PY  # from torchrun's shebang: the interpreter the workers run in
    assert s.script == proj / "train.py" and s.script_args == ["--bs", "8"]


def test_torchrun_module_and_python_m_torch_distributed_run(proj: Path) -> None:
    s = parse(["torchrun", "--nnodes=1", "-m", "pkg.train", "x"], proj, env_for(proj))
    assert s.module == "pkg.train" and s.script_args == ["x"]
    s = parse(["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py"], proj, env_for(proj))
    assert s.runner == "torchrun" and s.script == proj / "train.py" and s.python == str(proj / "bin" / "python3")
    s = parse(["python3", "-u", "-m", "torch.distributed.launch", "train.py"], proj, env_for(proj))
    assert s.runner == "torchrun" and s.unbuffered and s.script == proj / "train.py"


def test_accelerate_launch(proj: Path) -> None:
    s = parse(["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--mixed_precision=bf16", "train.py", "--e", "1"],
              proj, env_for(proj))
    assert s.runner == "accelerate" and s.python == PY
    assert s.script == proj / "train.py" and s.script_args == ["--e", "1"]
    # an unknown flag directly before the script is read as a flag
    s = parse(["accelerate", "launch", "--some_new_flag", "train.py"], proj, env_for(proj))
    assert s.script == proj / "train.py"


def test_env_prefixes_and_wrappers(proj: Path) -> None:
    s = parse(["env", "-u", "X", "A=1", "PYTHONUNBUFFERED=1", "nohup", "timeout", "-s", "INT", "1h",
               "stdbuf", "-oL", "python3", "train.py"], proj, env_for(proj))
    assert s.runner == "python" and s.script == proj / "train.py"
    assert s.env == {"A": "1", "PYTHONUNBUFFERED": "1"} and s.unbuffered
    s = parse(["CUDA_VISIBLE_DEVICES=0", "exec", "python3", "train.py"], proj, env_for(proj))
    assert s.env == {"CUDA_VISIBLE_DEVICES": "0"} and s.script == proj / "train.py"


def test_missing_script_interpreter_and_command(proj: Path) -> None:
    s = parse(["python3", "nope.py"], proj, env_for(proj))
    assert not s.exists and "nope.py" in s.problem and s.script == proj / "nope.py"
    s = parse(["python3.99", "train.py"], proj, env_for(proj))
    assert not s.exists and "python3.99" in s.problem and s.python is None
    s = parse(["/no/such/venv/bin/python", "train.py"], proj, env_for(proj))
    assert not s.exists and "/no/such/venv/bin/python" in s.problem
    s = parse(["torchrun", "missing.py"], proj, env_for(proj))
    assert not s.exists and "missing.py" in s.problem
    s = parse(["frobnicate"], proj, env_for(proj))
    assert s.runner == "other" and not s.exists and "frobnicate" in s.problem
    s = parse([], proj, env_for(proj))
    assert not s.exists and s.problem == "no command given"


def test_not_executable_script_is_a_problem(proj: Path) -> None:
    (proj / "run.sh").write_text("python3 train.py\n")
    s = parse(["./run.sh"], proj, env_for(proj))
    assert not s.exists and "not executable" in s.problem
    # ... but `bash run.sh` needs no execute bit
    s = parse(["bash", "run.sh"], proj, env_for(proj))
    assert s.exists and s.runner == "python" and s.launcher == proj / "run.sh"


def test_executable_python_script_uses_its_shebang(proj: Path) -> None:
    write_exec(proj / "tool.py", "#!/usr/bin/env python3\nprint(1)\n")
    s = parse(["./tool.py", "a"], proj, env_for(proj))
    assert s.runner == "python" and s.python == str(proj / "bin" / "python3")
    assert s.script == proj / "tool.py" and s.script_args == ["a"]


def test_launcher_followed_to_python(proj: Path) -> None:
    venv = proj / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(PY)
    (venv / "bin" / "activate").write_text("# activate\n")
    (proj / "src").mkdir()
    (proj / "src" / "train.py").write_text("print(1)\n")
    write_exec(proj / "launch.sh", """#!/bin/bash
set -euo pipefail
# the usual dance
cd "$(dirname "$0")"
source venv/bin/activate
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
mkdir -p logs
LR=${LR:-0.01}
cd src && A=1 nohup python -u train.py \\
    --lr $LR "$@" > ../logs/train.log 2>&1 &
echo started
""")
    s = parse([str(proj / "launch.sh"), "--epochs", "3"], Path("/"), env_for(proj))
    assert s.launcher == proj / "launch.sh"
    assert s.runner == "python"
    assert s.python == str(venv / "bin" / "python")  # from the activated venv, not the caller's PATH
    assert s.script == proj / "src" / "train.py"
    assert s.script_args == ["--lr", "0.01", "--epochs", "3"]
    assert s.unbuffered
    assert s.env["PYTHONUNBUFFERED"] == "1" and s.env["A"] == "1" and s.env["OMP_NUM_THREADS"] == "4"
    assert s.cwd == proj / "src"
    assert s.redirect == str(proj / "logs" / "train.log")
    assert s.line.startswith("cd src && A=1 nohup python -u train.py")


def test_launcher_calling_torchrun_and_nested_launcher(proj: Path) -> None:
    (proj / "inner.sh").write_text("torchrun --nproc_per_node $NPROC train.py \"$@\"\n")
    write_exec(proj / "outer.sh", "#!/bin/sh\nNPROC=2\nexport NPROC\nexec bash inner.sh --fast\n")
    s = parse(["./outer.sh"], proj, env_for(proj))
    assert s.runner == "torchrun" and s.python == PY
    assert s.script == proj / "train.py" and s.script_args == ["--fast"]


def test_launcher_that_names_a_missing_interpreter(proj: Path) -> None:
    (proj / "launch.sh").write_text("/opt/conda/envs/gone/bin/python train.py\n")
    s = parse(["bash", "launch.sh"], proj, env_for(proj))
    assert not s.exists and "/opt/conda/envs/gone/bin/python" in s.problem
    assert s.launcher == proj / "launch.sh"


def test_launcher_without_python(proj: Path) -> None:
    (proj / "launch.sh").write_text("echo nothing to see\nls -l\n")
    s = parse(["bash", "launch.sh"], proj, env_for(proj))
    assert s.runner == "launcher" and s.exists and s.python is None
    s = parse(["bash", "gone.sh"], proj, env_for(proj))
    assert not s.exists and "gone.sh" in s.problem


def test_bash_dash_c(proj: Path) -> None:
    s = parse(["bash", "-c", f"cd {proj} && python3 train.py > out.log 2>&1"], Path("/"), env_for(proj))
    assert s.runner == "python" and s.script == proj / "train.py" and s.redirect == str(proj / "out.log")
    assert s.launcher is None
    s = parse(["sh", "-c", "A=1 nohup python3 -u train.py > /workspace/train.log 2>&1 &"], proj, env_for(proj))
    assert s.script == proj / "train.py" and s.redirect == "/workspace/train.log" and s.unbuffered
    assert s.env == {"A": "1"}
    assert parse(["sh", "-c", "python3 train.py 2> err.log"], proj, env_for(proj)).redirect is None


def test_parse_launcher_option(proj: Path) -> None:
    (proj / "go.sh").write_text("python3 train.py \"$1\"\n")
    s = parse_launcher("go.sh", proj, ["first"], env_for(proj))
    assert s.script == proj / "train.py" and s.script_args == ["first"] and s.launcher == proj / "go.sh"


def test_launcher_recursion_is_bounded(proj: Path) -> None:
    (proj / "loop.sh").write_text("bash loop.sh\n")
    s = parse(["bash", "loop.sh"], proj, env_for(proj))
    assert s.runner == "launcher" and s.python is None


def test_binary_launcher_is_not_read(proj: Path) -> None:
    s = parse(["ls"], proj, env_for(proj))
    assert s.runner == "other" and s.exists and s.python is None


def test_spec_is_immutable(proj: Path) -> None:
    s = parse(["python3", "train.py"], proj, env_for(proj))
    with pytest.raises(Exception):
        s.runner = "other"  # type: ignore[misc]
    assert "train.py" in s.describe()


def test_uv_conda_poetry_run(proj: Path) -> None:
    for tool in ("uv", "poetry", "conda"):
        write_exec(proj / "bin" / tool, "#!/bin/sh\nexit 0\n")
    venv = proj / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(PY)
    (proj / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    s = parse(["uv", "run", "--frozen", "--with", "rich", "python", "-u", "train.py"], proj, env_for(proj))
    assert s.python == str(venv / "python") and s.script == proj / "train.py" and s.unbuffered
    s = parse(["uv", "run", "train.py", "--x"], proj, env_for(proj))
    assert s.python == str(venv / "python") and s.script_args == ["--x"]
    s = parse(["poetry", "run", "python", "train.py"], proj, env_for(proj))
    assert s.python == str(venv / "python")
    conda_env = proj / "miniconda3" / "envs" / "drafter" / "bin"
    conda_env.mkdir(parents=True)
    (conda_env / "python").symlink_to(PY)
    s = parse(["conda", "run", "-n", "drafter", "--no-capture-output", "python", "train.py"], proj, env_for(proj))
    assert s.python == str(conda_env / "python") and s.script == proj / "train.py"
    s = parse(["conda", "run", "-n", "gone", "python3", "train.py"], proj, env_for(proj))
    assert s.python == str(proj / "bin" / "python3")  # env not found: falls back to PATH, as a guess
    s = parse(["uv", "run"], proj, env_for(proj))
    assert not s.exists
    (proj / "bin" / "uv").unlink()
    s = parse(["uv", "run", "python", "train.py"], proj, env_for(proj))
    assert not s.exists and "uv: command not found" in s.problem


def test_option_without_its_argument(proj: Path) -> None:
    for argv in (["python3", "-m"], ["python3", "-u", "-c"]):
        s = parse(argv, proj, env_for(proj))
        assert not s.exists and "argument expected" in s.problem
    assert parse(["python3", "-c", ""], proj, env_for(proj)).exists


def test_parser_never_raises_on_garbage(proj: Path) -> None:
    import random
    words = ["python3", "-m", "-c", "-u", "-W", "train.py", "torchrun", "accelerate", "launch", "bash", "sh",
             "env", "A=1", "nohup", "exec", "timeout", "5", "--", "--nproc_per_node", "'", '"', "$@",
             "${X:-y}", "uv", "run", "conda", "-n", ">", "2>&1", "&", "|", ";", "cd", "..", "./launch.sh", "sudo"]
    (proj / "launch.sh").write_text("#!/bin/sh\ncd \"$(dirname \"$0\")\"\nexec bash launch.sh \"$@\"\n")
    rnd = random.Random(7)
    for _ in range(3000):
        argv = [rnd.choice(words) for _ in range(rnd.randint(0, 7))]
        parse(argv, proj, env_for(proj))
        parse(["sh", "-c", " ".join(argv)], proj, env_for(proj))


def test_login_shell_dash_c_and_conda_activate(proj: Path) -> None:
    conda_env = proj / "miniconda3" / "envs" / "drafter" / "bin"
    conda_env.mkdir(parents=True)
    (conda_env / "python").symlink_to(PY)
    s = parse(["bash", "-lc", "conda activate drafter && python train.py --fast"], proj, env_for(proj))
    assert s.python == str(conda_env / "python") and s.script == proj / "train.py" and s.script_args == ["--fast"]
    (proj / "miniconda3" / "bin").mkdir()
    (proj / "miniconda3" / "bin" / "activate").write_text("# conda's activate\n")
    (proj / "go.sh").write_text(f"source {proj}/miniconda3/bin/activate drafter\npython -u train.py\n")
    s = parse(["bash", "go.sh"], proj, env_for(proj))
    assert s.python == str(conda_env / "python") and s.unbuffered


def test_launcher_with_crlf_line_endings(proj: Path) -> None:
    write_exec(proj / "launch.sh", "#!/bin/bash\r\npython3 train.py\r\n")
    s = parse(["./launch.sh"], proj, env_for(proj))
    assert not s.exists and "CRLF" in s.problem and "sed -i" in s.problem
    # and it is real: the kernel cannot even start it ("/bin/bash\r": no such interpreter)
    import subprocess
    with pytest.raises(FileNotFoundError):
        subprocess.run([str(proj / "launch.sh")], cwd=proj, capture_output=True, env=env_for(proj), timeout=10)
    # run through bash, the \r reaches python as part of the script's name
    r = subprocess.run(["bash", str(proj / "launch.sh")], cwd=proj, capture_output=True, text=True,
                       env=env_for(proj), timeout=30)
    assert r.returncode != 0 and "train.py" in r.stderr and "No such file" in r.stderr


def test_torchrun_unknown_flag_before_another_option(proj: Path) -> None:
    s = parse(["torchrun", "--some-new-flag", "-m", "pkg.train", "--x"], proj, env_for(proj))
    assert s.module == "pkg.train" and s.script_args == ["--x"]
    s = parse(["torchrun", "--nnodes", "1", "--virtual-local-rank", "--nproc-per-node", "2", "train.py"], proj, env_for(proj))
    assert s.script == proj / "train.py"


def test_which_substitution_in_a_launcher(proj: Path) -> None:
    (proj / "go.sh").write_text('PY="$(command -v python3)"\n$PY -u train.py\n`which python3` other.py\n')
    s = parse(["bash", "go.sh"], proj, env_for(proj))
    assert s.python == str(proj / "bin" / "python3") and s.script == proj / "train.py" and s.unbuffered


def test_redirect_target_is_expanded(proj: Path) -> None:
    (proj / "go.sh").write_text('LOG=${TRAINER_LOG:-runs/trainer.log}\nexec python3 -u train.py >> "$LOG" 2>&1\n')
    assert parse(["bash", "go.sh"], proj, env_for(proj)).redirect == str(proj / "runs" / "trainer.log")
    s = parse(["bash", "go.sh"], proj, env_for(proj, TRAINER_LOG="/var/log/t.log"))
    assert s.redirect == "/var/log/t.log"
