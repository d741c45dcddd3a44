"""Where the environment a `... run` or `activate` names lives on disk (conda, mamba, micromamba, uv, poetry,
pipenv), found without asking the tool: `conda run -n` (commandline) and `conda activate` (walk) share it."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional


def env_prefix(name: str, opts: dict[str, str], cwd: Path, env: Mapping[str, str]) -> Optional[Path]:
    """The environment folder a `... run` tool would use, when it can be found without asking the tool."""
    if name in ("conda", "mamba", "micromamba"):
        if opts.get("-p") or opts.get("--prefix"):
            p = Path(opts.get("-p") or opts["--prefix"])
            return p if p.is_absolute() else cwd / p
        env_name = opts.get("-n") or opts.get("--name")
        if not env_name:
            return None
        roots = [Path(env[v]).parent.parent for v in ("CONDA_EXE", "MAMBA_EXE") if env.get(v)]
        roots += [Path(env["CONDA_PREFIX"]).parent.parent] if env.get("CONDA_PREFIX") else []
        roots += [Path(env[v]) for v in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT") if env.get(v)]
        home = Path(env.get("HOME", "~")).expanduser()
        roots += [home / d for d in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", ".conda")]
        roots += [Path("/opt/conda")]
        for root in roots:
            cand = root / "envs" / env_name
            if (cand / "bin").is_dir():
                return cand
        return None
    if name == "uv" and env.get("UV_PROJECT_ENVIRONMENT"):
        p = Path(env["UV_PROJECT_ENVIRONMENT"])
        return p if p.is_absolute() else cwd / p
    for folder in [cwd, *cwd.parents]:  # uv, poetry (in-project), pipenv (PIPENV_VENV_IN_PROJECT): ./.venv
        if (folder / ".venv" / "bin").is_dir():
            return folder / ".venv"
        if (folder / "pyproject.toml").is_file() or (folder / "Pipfile").is_file():
            break
    return None
