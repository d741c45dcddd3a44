"""What a launch command would actually run: the interpreter, the script or module, and its arguments.

`parse(argv, cwd)` reads a job's command the way the shell and the launchers would, without running
anything: `python -u train.py`, `/venv/bin/python -m pkg.mod`, `torchrun --nproc_per_node 4 train.py`,
`python -m torch.distributed.run ...`, `accelerate launch train.py`, env prefixes (`env A=1 python ...`),
wrappers (`nohup`, `exec`, `setsid`, `stdbuf`, `nice`, `timeout`), and shell launchers (`bash launch.sh`,
`./launch.sh`), which it follows to the Python line they run (`walk.py`: `cd`, variables, `export`,
`source`, `"$@"` on the way).

What depends on something that cannot be known without running the launcher is not guessed: the spec lists
it in `unknown`, and `exists` is False only when a path that was fully resolved is not there.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Optional, Sequence

from dfdoctor.launchline.envs import env_prefix
from dfdoctor.launchline.expand import Unknown
from dfdoctor.launchline.wrappers import SHELLS, read_through
from dfdoctor.lazy_re import compile_later

MAX_LAUNCHER_DEPTH = 4  # a launcher that calls a launcher that calls ... python
MAX_LAUNCHER_BYTES = 256 * 1024  # a "launcher" bigger than this is not a launcher we can read sensibly

_PYTHON_RE = compile_later(r"^(python|pypy)(\d+(\.\d+)*)?[mw]?$")
_ASSIGN_RE = compile_later(r"^[A-Za-z_][A-Za-z0-9_]*=")
_TORCHRUN_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
_ACCELERATE_MODULES = {"accelerate.commands.launch", "accelerate.commands.accelerate_cli", "accelerate"}

# Python's own options that take a value (as the next word, or glued on: `-Wignore`).
_PY_VALUE_OPTS = set("WX")
# Launcher options that are flags (take no value); any other `--opt` takes the next word unless it has `=`.
_TORCHRUN_FLAGS = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path",
                   "--use-env", "--use_env", "-m", "--module", "--virtual-local-rank", "--virtual_local_rank"}
_ACCELERATE_FLAGS = {"--cpu", "--multi_gpu", "--multi-gpu", "--tpu", "--ipex", "--use_xpu", "--use-xpu",
                     "--use_deepspeed", "--use-deepspeed", "--use_fsdp", "--use-fsdp", "--use_megatron_lm",
                     "--use-megatron-lm", "-m", "--module", "--no_python", "--no-python", "--debug", "-q",
                     "--quiet", "--same_network", "--same-network", "--tpu_use_cluster", "--tpu_use_sudo",
                     "--downcast_bf16", "--dynamo_use_fullgraph", "--dynamo_use_dynamic",
                     "--enable_cpu_affinity", "--enable-cpu-affinity", "-h", "--help"}


@dataclass(frozen=True)
class LaunchSpec:
    """What the command launches, as far as it can be known without running it.

    `runner` is 'python' | 'torchrun' | 'accelerate' | 'launcher' | 'other'. `python` is the interpreter
    that will run the user's code (the one the command names, or the shebang of torchrun/accelerate),
    resolved on PATH, else None. `exists`/`problem` say whether the command or script is there and
    executable (a problem here is cause `command-not-found`): False only when a fully resolved path was
    looked at and is not there. `unknown` lists, in words, each word the command depends on that could not
    be resolved without running the launcher (the interpreter, the script or its folder is then None or
    partial, never a guess). `env` holds the variables the command or its launcher sets for the job
    (`A=1 python ...`, `export A=1`; `unknown_env` names those whose value is not known), `cwd` the folder
    the script runs in after any `cd` in a launcher, `redirect` the file the launcher line sends stdout to,
    and `notes` what the walk saw but could not follow.
    """

    argv: tuple[str, ...]
    runner: str = "other"
    python: Optional[str] = None
    script: Optional[Path] = None
    module: Optional[str] = None
    code: Optional[str] = None
    script_args: list[str] = field(default_factory=list)
    unbuffered: bool = False
    launcher: Optional[Path] = None
    exists: bool = True
    problem: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[Path] = None
    redirect: Optional[str] = None
    line: Optional[str] = None
    unknown: tuple[str, ...] = ()
    unknown_env: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def resolved(self) -> bool:
        """True when everything the launch depends on was resolved exactly."""
        return not self.unknown

    @property
    def is_python(self) -> bool:
        """True when the job's code runs in a Python interpreter dfdoctor can name or find."""
        return self.runner in ("python", "torchrun", "accelerate") or self.python is not None

    def describe(self) -> str:
        """A short human phrase for what runs: 'python -m pkg.mod', 'torchrun train.py', ..."""
        what = f"-m {self.module}" if self.module else (str(self.script) if self.script else
                                                          ("-c ..." if self.code is not None else ""))
        via = f" (via {self.launcher})" if self.launcher else ""
        return f"{self.runner} {what}".strip() + via


def parse(argv: Sequence[str], cwd: Path, env: Optional[Mapping[str, str]] = None) -> LaunchSpec:
    """Parse a job's argv as run in `cwd` with environment `env` (default: this process's)."""
    env = dict(os.environ if env is None else env)
    return _parse(list(argv), Path(cwd), env, depth=0, extra_env={})


def parse_launcher(path: os.PathLike | str, cwd: Path, args: Sequence[str] = (),
                   env: Optional[Mapping[str, str]] = None) -> LaunchSpec:
    """Follow a launcher shell script (`--launcher FILE`) to the Python command it runs."""
    env = dict(os.environ if env is None else env)
    p = Path(path)
    p = p if p.is_absolute() else Path(cwd) / p
    return _follow_launcher(p, list(args), (str(path), *args), Path(cwd), env, depth=0, extra_env={},
                            zero=str(path))


def _is_bash(shell: str) -> Optional[bool]:
    """Whether a shell word runs bash (BASH_SOURCE is set), dash/ash (it is not), or another shell (None)."""
    found = shell if os.path.isabs(shell) else (shutil.which(shell) or shell)
    real = os.path.basename(os.path.realpath(found)) if os.path.exists(found) else os.path.basename(shell)
    if real in ("bash", "rbash"):
        return True
    if real in ("dash", "ash", "busybox", "sh"):
        return False if real != "sh" else None
    return None


def guessed_interpreter(ctx, spec: LaunchSpec) -> Optional[str]:
    """Why the training interpreter may not be the job's: the walk could not resolve the job's interpreter and
    no --python named it (the probes then run in python3 or the like). None when it is the job's. A finding a
    probe made there is a lead about the job, not an observation of it (`basis=STATIC`)."""
    if spec.python is not None or not spec.unknown or getattr(ctx, "python_given", False):
        return None
    if not (ctx.command or getattr(ctx, "launcher", None)):
        return None
    return (f"the job's interpreter could not be resolved ({'; '.join(spec.unknown)}), so this was tried in "
            f"{ctx.python}; pass --python with the job's interpreter to make it a finding about the job")


def as_lead(results, why: Optional[str]):
    """Mark the warnings and failures of a probe run in a guessed interpreter as static, saying why."""
    for r in results:
        if why and r.status.value in ("fail", "warn"):
            r = replace(r, basis="static", details=(r.details + "\n" if r.details else "") + why)
        yield r


def spec_for(ctx) -> LaunchSpec:
    """The LaunchSpec of a check's Context: its command, else its `--launcher`, else an empty command."""
    if ctx.command:
        return parse(ctx.command, ctx.cwd, ctx.env)
    if getattr(ctx, "launcher", None):
        return parse_launcher(ctx.launcher, ctx.cwd, (), ctx.env)
    return parse([], ctx.cwd, ctx.env)


# ---------------------------------------------------------------------------------------------------------


def _parse(argv: list[str], cwd: Path, env: dict[str, str], depth: int, extra_env: dict[str, str],
           orig: Optional[tuple[str, ...]] = None) -> LaunchSpec:
    """Parse argv (after any launcher expansion) into a LaunchSpec; `orig` is what the user typed."""
    orig = tuple(argv) if orig is None else orig
    words, assigned = _strip_prefixes(argv)
    extra_env = {**extra_env, **assigned}
    if not words:
        return LaunchSpec(orig, exists=False, problem="no command given", env=extra_env)
    run_env = {**env, **extra_env}
    head = words[0]
    base = LaunchSpec(orig, env=extra_env, cwd=cwd if isinstance(cwd, Path) else None)
    if isinstance(head, Unknown):  # `$PYTHON train.py`: what runs is not known, the rest may be
        if any(str(w).endswith(".py") for w in words[1:]) or re.search(r"py", str(head), re.I):
            return _python(words[1:], None, Unknown(head, f"the interpreter `{head}`: {head.why}"), cwd, run_env, base)
        return _missing(replace(base, runner="other"), Unknown(head, f"the command `{head}`: {head.why}"))
    name = os.path.basename(head)

    if name in SHELLS:
        return _shell(words, cwd, env, depth, extra_env, orig, base)
    if name in _ENV_RUNNERS and len(words) > 1 and words[1] == "run" and depth < MAX_LAUNCHER_DEPTH:
        tool, problem = _resolve_exe(head, cwd, run_env)
        if tool is None and not isinstance(problem, Unknown):
            return replace(base, exists=False, problem=problem)
        return _env_runner(name, words[2:], cwd, env, depth, extra_env, orig, base)

    exe, problem = _resolve_exe(head, cwd, run_env)
    if _PYTHON_RE.match(name):
        return _python(words[1:], exe, problem, cwd, run_env, base)
    if name == "torchrun":
        return _torchrun(words[1:], _interpreter_of(exe, cwd, run_env) if exe else None, problem, cwd, base)
    if name == "accelerate":
        rest = words[1:]
        if rest and rest[0] == "launch":
            rest = rest[1:]
        return _accelerate(rest, _interpreter_of(exe, cwd, run_env) if exe else None, problem, cwd, base)
    if exe is None:
        return _missing(replace(base, runner="other"), problem)
    shebang = _shebang(Path(exe))
    if shebang:
        interp = os.path.basename(shebang[-1] if shebang[0].endswith("/env") else shebang[0])
        if _PYTHON_RE.match(interp):  # an executable Python script: `./train.py`
            py = _interpreter_of(exe, cwd, run_env)
            return replace(base, runner="python", python=py, script=Path(exe), script_args=words[1:],
                           unbuffered="-u" in shebang[1:] or _env_unbuffered(run_env))
        if interp in SHELLS or shebang[0].endswith("/env") and shebang[-1] in SHELLS:
            shell = shebang[-1] if shebang[0].endswith("/env") else shebang[0]
            return _follow_launcher(Path(exe), words[1:], orig, cwd, env, depth, extra_env,
                                    zero=head if "/" in head else exe, bash=_is_bash(shell))
    elif _looks_like_shell_script(Path(exe)):  # no shebang: the calling shell runs it (sh here)
        return _follow_launcher(Path(exe), words[1:], orig, cwd, env, depth, extra_env,
                                zero=head if "/" in head else exe, bash=_is_bash("sh"))
    return replace(base, runner="other")


# `uv run`, `conda run -n ENV`, ...: {tool: options that take a value}. The command after them runs in an
# environment the tool picks; we find that environment's bin/ where we can and put it first on PATH.
_ENV_RUNNERS: dict[str, set[str]] = {
    "uv": {"--with", "--with-editable", "--with-requirements", "--python", "-p", "--project", "--directory",
           "--package", "--extra", "--group", "--only-group", "--no-group", "--env-file", "--index",
           "--default-index", "--index-url", "--extra-index-url", "-f", "--find-links", "--cache-dir",
           "--config-file", "--color", "--exclude-newer", "--prerelease", "--resolution", "--link-mode",
           "--refresh-package", "--reinstall-package", "--upgrade-package", "-P", "--index-strategy",
           "--keyring-provider", "--python-platform", "--allow-insecure-host", "--config-setting", "-C"},
    "poetry": {"--directory", "-C", "--project", "-P"},
    "pipenv": set(),
    "conda": {"-n", "--name", "-p", "--prefix", "--cwd"},
    "mamba": {"-n", "--name", "-p", "--prefix", "--cwd"},
    "micromamba": {"-n", "--name", "-p", "--prefix", "--cwd", "-r", "--root-prefix"},
}


def _env_runner(name: str, args: list[str], cwd: Path, env: dict[str, str], depth: int,
                extra_env: dict[str, str], orig: tuple[str, ...], base: LaunchSpec) -> LaunchSpec:
    """`uv run python train.py`, `conda run -n ENV python train.py`, `poetry run python ...`, `pipenv run ...`."""
    takes_value = _ENV_RUNNERS[name]
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        opt, eq, val = args[i].partition("=")
        if eq:
            opts[opt] = val
            i += 1
        elif opt in takes_value and i + 1 < len(args):
            opts[opt] = args[i + 1]
            i += 2
        else:
            i += 1
    if i < len(args) and args[i] == "--":
        i += 1
    rest = args[i:]
    if not rest:
        return replace(base, exists=False, problem=f"{name} run is given no command")
    here = cwd
    for key in ("--directory", "--cwd", "--project") + (("-C",) if name == "poetry" else ()):
        if key in opts:
            d = Path(opts[key])
            here = Path(os.path.normpath(d if d.is_absolute() else cwd / d))
            break
    if name == "uv" and rest[0].endswith(".py"):
        rest = ["python", *rest]  # `uv run train.py` runs the script with the project's Python
    prefix = env_prefix(name, opts, here, {**env, **extra_env})
    more = dict(extra_env)
    if prefix is not None:
        more["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
        more["VIRTUAL_ENV" if name != "conda" else "CONDA_PREFIX"] = str(prefix)
    return _parse(rest, here, env, depth + 1, more, orig)


def _strip_prefixes(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Drop `A=1` assignments and read through wrappers (`env A=1`, `nohup`, `taskset -c 0`, ...: one table,
    launchline/wrappers.py); return the real command and the env. A wrapper option the table does not know
    stops the reading at that wrapper: what it runs is not guessed."""
    words = list(argv)
    assigned: dict[str, str] = {}
    while words:
        while words and _ASSIGN_RE.match(words[0]):
            k, v = words.pop(0).split("=", 1)
            assigned[k] = v
        through = read_through(words)
        if not through.wrappers:
            break
        assigned.update(through.env)
        if through.unknown:
            last = through.wrappers[-1]
            words = words[last[2] + len(last[1]):]
            break
        words = words[through.index:]
    return words, assigned


def _python(args: list[str], exe: Optional[str], problem: Optional[str], cwd: Path, env: dict[str, str],
            base: LaunchSpec) -> LaunchSpec:
    """`python [opts] (script | -m mod | -c code | -) [args]`."""
    unbuffered = _env_unbuffered(env)
    i = 0
    no_value = False
    module = code = None
    script: Optional[str] = None
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a.startswith("--"):  # --version, --help, --check-hash-based-pycs VALUE
            if a == "--check-hash-based-pycs":
                i += 1
            i += 1
            continue
        # a cluster of one-letter options: `-uB`, `-mpkg`, `-Wignore`, `-X dev`
        j = 1
        stop = False
        while j < len(a):
            c = a[j]
            if c == "u":
                unbuffered = True
            elif c in ("m", "c"):
                if not a[j + 1:] and i + 1 >= len(args):
                    no_value = True
                val = a[j + 1:] or (args[i + 1] if i + 1 < len(args) else "")
                i += 1 if a[j + 1:] else 2
                if c == "m":
                    module = val
                else:
                    code = val
                stop = True
                break
            elif c in _PY_VALUE_OPTS:
                if not a[j + 1:]:
                    i += 1
                break
            j += 1
        if stop:
            rest = args[i:]
            break
        i += 1
    else:
        rest = []
    if module is None and code is None:
        if i < len(args):
            script = args[i]
            rest = args[i + 1:]
        else:
            rest = []
    spec = replace(base, runner="python", python=exe, unbuffered=unbuffered, script_args=list(rest),
                   module=module, code=code)
    if problem:
        spec = _missing(spec, problem)
        if not spec.exists:
            return spec
    if no_value:
        return replace(spec, exists=False, problem="python: argument expected for the -m/-c option")
    if module in _TORCHRUN_MODULES:
        return _torchrun(list(rest), exe, None, cwd, replace(spec, module=None))
    if module in _ACCELERATE_MODULES:
        if rest and rest[0] == "launch":
            rest = rest[1:]
        return _accelerate(list(rest), exe, None, cwd, replace(spec, module=None))
    if script is not None and script != "-":
        return _with_script(spec, script, cwd)
    return spec


def _torchrun(args: list[str], python: Optional[str], problem: Optional[str], cwd: Path,
              base: LaunchSpec) -> LaunchSpec:
    """`torchrun [--opt value | --flag]... (script | -m mod) [args]`."""
    return _launcher_cli(args, "torchrun", _TORCHRUN_FLAGS, python, problem, cwd, base)


def _accelerate(args: list[str], python: Optional[str], problem: Optional[str], cwd: Path,
                base: LaunchSpec) -> LaunchSpec:
    """`accelerate launch [--opt value | --flag]... (script | -m mod) [args]`."""
    return _launcher_cli(args, "accelerate", _ACCELERATE_FLAGS, python, problem, cwd, base)


def _launcher_cli(args: list[str], runner: str, flags: set[str], python: Optional[str],
                  problem: Optional[str], cwd: Path, base: LaunchSpec) -> LaunchSpec:
    """Shared option walk of torchrun and accelerate: skip options to the script or `-m` module."""
    is_module = no_python = False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-"):
            break
        opt = a.split("=", 1)[0]
        if opt in ("-m", "--module"):
            is_module = True
        elif opt in ("--no-python", "--no_python"):
            no_python = True
        if "=" in a or opt in flags or (i + 1 < len(args) and args[i + 1].startswith("-")):
            i += 1  # `--opt=v`, a known flag, or an unknown option followed by another option: a flag
        elif i + 1 < len(args) and args[i + 1].endswith(".py") and not args[i + 1].startswith("-"):
            i += 1  # an unknown flag right before the script: a flag, not an option with a value
        else:
            i += 2
    target = args[i] if i < len(args) else None
    rest = list(args[i + 1:])
    spec = replace(base, runner=runner, python=python, script_args=rest,
                   unbuffered=base.unbuffered or _env_unbuffered(base.env))
    if problem:
        spec = _missing(spec, problem)
        if not spec.exists:
            return spec
    if target is None:
        return replace(spec, exists=False, problem=f"{runner} is given no script to run")
    if is_module:
        return replace(spec, module=target)
    if no_python:
        return replace(spec, runner="other", python=None)
    return _with_script(spec, target, cwd)


def _with_script(spec: LaunchSpec, script: str, cwd: Path) -> LaunchSpec:
    """Attach the script (absolute, relative to cwd) and say whether it can be run."""
    if isinstance(script, Unknown):
        return _missing(spec, Unknown(script, f"the script `{script}`: {script.why}"))
    p = _at(cwd, script)
    if isinstance(p, Unknown):
        return _missing(spec, Unknown(script, f"the script `{script}`: {p.why}"))
    p = Path(os.path.normpath(p))
    spec = replace(spec, script=p)
    if not p.exists():
        return replace(spec, exists=False, problem=f"script not found: {p}")
    if p.is_dir() and not (p / "__main__.py").exists():
        return replace(spec, exists=False, problem=f"{p} is a folder without __main__.py")
    if not os.access(p, os.R_OK):
        return replace(spec, exists=False, problem=f"script not readable: {p}")
    return spec


def _shell(words: list[str], cwd: Path, env: dict[str, str], depth: int, extra_env: dict[str, str],
           orig: tuple[str, ...], base: LaunchSpec) -> LaunchSpec:
    """`bash [opts] launch.sh [args]` or `bash -c 'LINE'`."""
    i = 1
    def is_dash_c(w: str) -> bool:
        """`-c`, or a cluster that holds it: `-lc`, `-ec`, `-xc`."""
        return w.startswith("-") and not w.startswith("--") and "c" in w[1:]

    while i < len(words) and words[i].startswith("-") and words[i] != "--" and not is_dash_c(words[i]):
        i += 2 if words[i] in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file") else 1
    if i < len(words) and is_dash_c(words[i]):
        if i + 1 >= len(words):
            return replace(base, exists=False, problem=f"{words[0]} -c is given no command")
        if isinstance(words[i + 1], Unknown):
            return _missing(replace(base, runner="launcher"), Unknown(words[i + 1], f"the -c line `{words[i + 1]}`: {words[i + 1].why}"))
        return _walk(words[i + 1], None, list(words[i + 3:]), orig, cwd, env, depth + 1, extra_env,
                     replace(base, runner="other"), zero=words[i + 2] if i + 2 < len(words) else words[0],
                     bash=_is_bash(words[0]), is_file=False)
    if i < len(words) and words[i] == "--":
        i += 1
    if i >= len(words):
        return replace(base, runner="other")  # an interactive shell: nothing to follow
    path = _at(cwd, words[i])
    if isinstance(path, Unknown):
        return _missing(replace(base, runner="launcher"), Unknown(words[i], f"the launcher `{words[i]}`: {path.why}"))
    return _follow_launcher(path, list(words[i + 1:]), orig, cwd, env, depth, extra_env, need_exec=False,
                            zero=words[i], bash=_is_bash(words[0]))


def _follow_launcher(path: Path, args: list[str], orig: tuple[str, ...], cwd, env: dict[str, str],
                     depth: int, extra_env: dict[str, str], need_exec: bool = False, *, zero: Optional[str] = None,
                     bash: Optional[bool] = None) -> LaunchSpec:
    """Read a shell launcher and parse the first line that starts Python (or another launcher)."""
    if bash is None:
        sb = _shebang(path)
        bash = _is_bash((sb[-1] if sb[0].endswith("/env") else sb[0]) if sb else "sh")
    base = LaunchSpec(orig, runner="launcher", launcher=path, env=extra_env, cwd=cwd if isinstance(cwd, Path) else None)
    if not path.exists():
        return replace(base, exists=False, problem=f"launcher not found: {path}")
    if path.is_dir():
        return replace(base, exists=False, problem=f"launcher is a folder: {path}")
    if need_exec and not os.access(path, os.X_OK):
        return replace(base, exists=False, problem=f"launcher is not executable: {path}")
    if depth >= MAX_LAUNCHER_DEPTH:
        return base
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LAUNCHER_BYTES)
    except OSError as exc:
        return replace(base, exists=False, problem=f"launcher not readable: {path} ({exc.strerror})")
    if b"\r\n" in data:
        # bash reads `train.py\r` and `#!/bin/bash\r` ("bad interpreter"): the classic silent launch failure
        return replace(base, exists=False,
                       problem=f"launcher {path} has Windows (CRLF) line endings; the shell sees a stray \\r at the end "
                               f"of every line (fix: sed -i 's/\\r$//' {path})")
    text = data.decode("utf-8", "replace")
    if any(isinstance(a, Unknown) for a in args):
        args = Unknown("$@", "the launcher's arguments are not all known")  # type: ignore[assignment]
    return _walk(text, path, args, orig, cwd, env, depth, extra_env, base, zero=zero or str(path), bash=bash)


def _walk(text: str, path: Optional[Path], args: list[str], orig: tuple[str, ...], cwd, env: dict[str, str],
          depth: int, extra_env: dict[str, str], base: LaunchSpec, *, zero: str, bash: Optional[bool],
          is_file: bool = True) -> LaunchSpec:
    """Walk a shell script (or one `-c` line) to the command that starts the job; see `walk.py`."""
    # imported here: only a launcher or an `sh -c` line is walked; it brings the shell parser (issue 45)
    from dfdoctor.launchline.walk import WalkState, start_state, walk
    state = start_state({**env, **extra_env}, cwd, zero, zero if is_file else None, args, bash)
    state.exported |= set(extra_env)

    def follow(words: list, here, job_env: dict, prefix: dict, st: WalkState) -> Optional[LaunchSpec]:
        if not _runs_something(words, here, {**job_env, **prefix}):
            return None
        spec = _parse(list(words), here, job_env, depth + 1, dict(prefix))
        if spec.runner == "other" and spec.exists and not spec.unknown:
            return None  # e.g. `mkdir -p logs`, `nvidia-smi`: not the job itself
        return spec

    found = walk(text, state, follow)
    if found is None:
        unknown = tuple(n for n in state.notes if "not followed" in n)
        if state.ended and state.failed:  # seen: the folder or file is not there, and the script stops
            return replace(base, exists=False, problem=state.ended, notes=tuple(state.notes))
        if state.ended and not unknown:
            return replace(base, notes=tuple(state.notes))
        return replace(base, unknown=base.unknown + unknown, notes=tuple(state.notes))
    spec: LaunchSpec = found.spec  # type: ignore[assignment]
    if not spec.exists and found.state.fs_changed and "CRLF" not in (spec.problem or ""):
        # not there now, but an earlier command of the launcher (cp, git, tar, ...) may put it there
        spec = replace(spec, exists=True, problem=None,
                       unknown=spec.unknown + (f"{spec.problem}, but {found.state.fs_changed}",))
    start_env = {**env, **extra_env}
    exported = {k: v for k, v in found.state.environment().items()
                if k not in ("PWD", "OLDPWD") and (k in extra_env or start_env.get(k) != v)}
    merged = {**exported, **spec.env}
    known_env = {k: v for k, v in merged.items() if not isinstance(v, Unknown)}
    unknown_env = tuple(sorted(k for k, v in merged.items() if isinstance(v, Unknown)))
    redirect = found.redirect if found.redirect is not None else spec.redirect
    unknown = tuple(found.unknown) + spec.unknown
    if isinstance(redirect, Unknown):
        redirect = None
    launcher = spec.launcher if spec.runner == "launcher" or not is_file else path
    return replace(spec, argv=orig, launcher=launcher, env=known_env, unknown_env=unknown_env + spec.unknown_env,
                   redirect=redirect, line=found.line, unknown=unknown,
                   notes=tuple(found.state.notes) + spec.notes,
                   unbuffered=spec.unbuffered or _env_unbuffered(known_env))


def _runs_something(words: list, cwd, env: Mapping[str, str]) -> bool:
    """Could this command be the job: Python, a Python launcher, another shell launcher, or a word that
    cannot be resolved but names one (`$PYTHON train.py`)?"""
    head = words[0]
    if isinstance(head, Unknown):
        return any(str(w).endswith((".py", ".sh")) for w in words[1:]) or bool(
            re.search(r"py|torchrun|accelerate|launch", str(head), re.I))
    stripped, _ = _strip_prefixes([str(w) if not isinstance(w, Unknown) else w for w in words])
    if not stripped:
        return False
    if isinstance(stripped[0], Unknown):
        return True
    name = os.path.basename(stripped[0])
    if _PYTHON_RE.match(name) or name in ("torchrun", "accelerate") or name in SHELLS or name in _ENV_RUNNERS:
        return True
    if name in _NOT_THE_JOB:
        return False
    exe, problem = _resolve_exe(stripped[0], cwd, env)
    if exe is None:
        return isinstance(problem, Unknown) or "/" in stripped[0] and stripped[0].endswith((".sh", ".py"))
    return _shebang(Path(exe)) is not None or _looks_like_shell_script(Path(exe))


# Commands a launcher runs on its way that are never the job (even when they are scripts with a shebang).
_NOT_THE_JOB = {"echo", "printf", "true", ":", "mkdir", "rm", "cp", "mv", "ls", "cat", "touch", "date",
                "hostname", "nvidia-smi", "sleep", "wait", "pip", "pip3", "git", "tee", "chmod", "ln", "export"}


def _at(cwd, word: str):
    """A path word made absolute against the folder, or Unknown when it is relative to an unknown folder."""
    if isinstance(word, Unknown):
        return word
    if os.path.isabs(word):
        return Path(word)
    if isinstance(cwd, Unknown):
        return Unknown(word, f"`{word}` is relative to a folder that is not known ({cwd.why})")
    return Path(cwd) / word


def _missing(spec: LaunchSpec, problem) -> LaunchSpec:
    """A spec that cannot start (an observed problem), or one that depends on something unknown."""
    if isinstance(problem, Unknown):
        entry = problem.why if problem.why.startswith("the ") else f"`{problem}`: {problem.why}"
        return replace(spec, unknown=spec.unknown + (entry,))
    return replace(spec, exists=False, problem=problem)


def _resolve_exe(word: str, cwd, env: Mapping[str, str]) -> tuple[Optional[str], Optional[str]]:
    """Resolve a command word as the shell would: a path (relative to cwd) or a PATH lookup. The problem
    is an Unknown (not a finding) when the answer depends on something not known: the word, the folder, PATH."""
    if isinstance(word, Unknown):
        return None, word
    if "/" in word:
        p = _at(cwd, word)
        if isinstance(p, Unknown):
            return None, p
        if not p.exists():
            return None, f"{word}: no such file"
        if p.is_dir():
            return None, f"{word}: is a folder"
        if not os.access(p, os.X_OK):
            return None, f"{word}: not executable (chmod +x, or run it with its interpreter)"
        return str(p), None
    path = env.get("PATH", os.defpath)
    if isinstance(path, Unknown):
        return None, Unknown(word, f"`{word}` is looked up on $PATH, which is not known ({path.why})")
    found = shutil.which(word, path=path)
    if found is None:
        return None, f"{word}: command not found on PATH"
    return found, None


def _shebang(path: Path) -> Optional[list[str]]:
    """The interpreter line of a script as words, or None for a binary or a file without one."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    first = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    words = first.split()
    if not words:
        return None
    if words[0].endswith("/env"):
        words = [words[0]] + [w for w in words[1:] if not w.startswith("-")]
    # pip's trampoline for long interpreter paths: #!/bin/sh then '''exec' "/long/python" "$0" "$@"
    m = re.search(rb"'''exec' \"?([^\"\s]+)\"? ", head)
    if os.path.basename(words[0]) == "sh" and m:
        return [m.group(1).decode()]
    return words


def _interpreter_of(exe: str, cwd: Path, env: Mapping[str, str]) -> Optional[str]:
    """The Python that runs an executable script such as `torchrun` or `./train.py`, from its shebang."""
    sb = _shebang(Path(exe))
    if not sb:
        return None
    if sb[0].endswith("/env"):
        if len(sb) < 2:
            return None
        found, _ = _resolve_exe(sb[1], cwd, env)
        return found
    return sb[0] if os.path.exists(sb[0]) else None


def _looks_like_shell_script(path: Path) -> bool:
    """A file without a shebang that is still meant for a shell (by its suffix)."""
    return path.suffix in (".sh", ".bash")


def _env_unbuffered(env: Mapping[str, str]) -> bool:
    """Does this environment make Python's stdout unbuffered?"""
    return bool(env.get("PYTHONUNBUFFERED"))
