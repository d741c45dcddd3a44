"""What a check knows about the launch it is judging."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from dfdoctor.targets.target import Target


@dataclass
class Context:
    """The launch under examination, as the user described it on the command line and in config.

    `command` is the job's argv (may be empty for a bare `dfdoctor check`). `python` is the training
    interpreter: every check that imports torch or user code runs there, in a subprocess, never in
    dfdoctor's own process. `run` is filled in the post phase: the run folder, pid and record. `target` is
    the parsed `--target`, parsed once where the context is built (`engine.build_context`): whether the job runs
    here is `ctx.target.runs_here`, its spelling for a report `str(ctx.target)`.
    """

    command: list[str] = field(default_factory=list)
    cwd: Path = field(default_factory=Path.cwd)
    python: str = "python3"
    python_given: bool = False  # --python named it (else it was read from the command, or is python3)
    log: Optional[Path] = None
    no_redirect: bool = False
    requirements: list[Path] = field(default_factory=list)
    shell_command: Optional[str] = None
    launcher: Optional[Path] = None
    require_gpu: bool = False
    target: Target = field(default_factory=Target)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    phase: str = "pre"
    timeout: Optional[float] = None
    run: Optional[dict[str, Any]] = None
    config: dict[str, Any] = field(default_factory=dict)
    cwd_note: str = ""  # how the cwd was chosen on a target without --cwd, in words
    typed_line: Optional[str] = None  # the launch line given after `--`, when the job was read out of it
    launching: bool = False  # `dfdoctor launch` will start the job itself (with `strategy` on a target)
    strategy: str = "auto"  # launch --strategy: how the recorder is detached on a target
    only: tuple[str, ...] = ()  # the checks asked for by name (--only, or the config's `only`)

    def __post_init__(self) -> None:
        if not isinstance(self.target, Target):  # a spec string here would be compared as text again
            raise TypeError(f"Context.target is a Target (targets.parse_target), not {type(self.target).__name__}")

    def option(self, check_id: str, name: str, default: Any = None) -> Any:
        """A per-check setting from `[tool.dfdoctor.checks."<id>"]` in the config."""
        return (self.config.get("checks", {}).get(check_id, {}) or {}).get(name, default)

    def abspath(self, p: os.PathLike | str) -> Path:
        """A path as the job would resolve it: relative to the job's working directory."""
        p = Path(p)
        return p if p.is_absolute() else self.cwd / p
