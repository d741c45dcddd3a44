"""The environment a batch job gets, from its --export and --export-file (sbatch's rules, 22.05):
- no --export, or ALL (`ALL,VAR=x`): the submitting shell's whole environment, plus the assignments named;
- NONE, or a list without ALL (`VAR1,VAR2=x`): only SLURM_* variables and those named, on top of the user's
  login environment, which Slurm loads on the node as if --get-user-env were given (`su - USER`; seen on the
  test cluster: PATH, HOME and what ~/.profile sets, none of the submitting shell's PYTHONPATH);
- --export-file FILE: the NUL-separated `VAR=value` entries of FILE are added, except under --export=NONE,
  which wins (measured: the job gets none of the file's variables). 22.05 splits the file at NUL bytes only:
  a file of lines gives its first variable the whole rest of the file, newlines included (measured), so such a
  file is said, and the node checks get what the job gets.
The node checks run under the same rules: the srun that carries them gets `--export=NONE` and a login shell
(`bash -l`) builds the login environment on the node, as Slurm does for the job."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from dfdoctor.slurm.sbatch import Submission


@dataclass(frozen=True)
class JobEnv:
    """How to give a command on a node the job's environment."""

    inherit: bool  # the submitting environment goes with it (ALL)
    assign: dict[str, str] = field(default_factory=dict)  # set on top
    said: str = "--export=ALL (the submitting shell's environment)"
    problem: Optional[str] = None  # an --export-file that could not be read

    def srun_options(self) -> list[str]:
        return [] if self.inherit else ["--export=NONE"]

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run as the job would run it: under a login shell when the user's environment is not passed."""
        setting = ["/usr/bin/env", *(f"{k}={v}" for k, v in self.assign.items())] if self.assign else []
        if self.inherit:
            return setting + argv
        return ["/bin/bash", "-lc", 'exec "$@"', "bash", *setting, *argv]


def of(sub: Submission, env: Mapping[str, str], cwd: Path) -> JobEnv:
    """The job's environment as its --export/--export-file say."""
    spec = sub.get("export")
    words = [w for w in (spec or "").split(",") if w] if spec else []
    inherit = not words or "ALL" in words
    assign: dict[str, str] = {}
    for w in words:
        if w in ("ALL", "NONE", "NIL"):
            continue
        name, eq, value = w.partition("=")
        if eq:
            assign[name] = value
        elif name in env and not inherit:
            assign[name] = env[name]
    problem: Optional[str] = None
    efile = sub.get("export-file")
    if efile and "NONE" in words:
        efile = None  # NONE wins over the file (measured on 22.05)
    if efile:
        try:
            text = (Path(efile) if Path(efile).is_absolute() else cwd / efile).read_text(errors="replace")
            for entry in text.split("\0"):
                name, eq, value = entry.partition("=")
                if eq and name:
                    assign[name] = value
                    if "\n" in value:
                        problem = (f"--export-file {efile}: Slurm splits it at NUL bytes only, so {name} gets "
                                   f"{value!r}, newlines included (write it with `env -0` or printf '%s\\0')")
        except OSError as exc:
            problem = f"--export-file {efile}: {exc.strerror or exc}"
    said = (f"--export={spec}" if spec else "no --export (ALL)") + (
        "" if inherit else ": SLURM_* and the named variables on the user's login environment")
    if efile:
        said += f", plus --export-file {efile}"
    return JobEnv(inherit, assign, said, problem)
