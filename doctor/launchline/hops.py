"""The vocabulary of the launch-path analyser: hops, where a descriptor points, what a shell inherits, findings."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor.launchline.wrappers import SHELLS  # noqa: F401 (one list of shells, re-exported)

BUILTINS = {"cd", "export", "source", ".", "set", "ulimit", "alias", "unset", "pushd", "popd", "umask"}
NOT_A_JOB = BUILTINS | {"echo", "printf", "mkdir", "sleep", "tee", "cat", "true", "false", "test", "[",
                        "touch", "rm", "cp", "mv", "ls", "wait", "trap", "read", "shift", "conda", "module",
                        "activate", "deactivate", "pip", "chmod", "date", "which", "hostname", "tail",
                        "disown", "return", "exit", "local", "declare", "readonly", "eval", "let", "wc",
                        "grep", "sed", "awk", "kill", "pkill", "ps", "nvidia-smi", "ln"}
PYTHONS = ("python", "python3", "torchrun", "accelerate", "deepspeed", "uv", "poetry", "pdm", "hatch")
SSH_OPTS_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")
LOCAL = "your machine"


@dataclass
class Hop:
    """One step on the way from your terminal to the job."""

    index: int
    where: str
    parsed_by: str
    tty: bool
    command: str
    note: str = ""

    def row(self) -> dict:
        """The hop as a table row for renderers."""
        return {"hop": self.index, "where": self.where, "parsed by": self.parsed_by,
                "tty": "yes" if self.tty else "no", "command": self.command, "note": self.note}


@dataclass(frozen=True)
class Finding:
    """What is wrong at one hop, why, and the line that fixes it."""

    status: str  # fail | warn
    cause: str
    hop: int
    summary: str
    details: str = ""
    fix: str = ""


@dataclass(frozen=True)
class Fd:
    """Where one of the job's descriptors points: a file, an ssh channel, a terminal, a tmux pane."""

    kind: str  # file | ssh | tty | pane | null | mail | journal | terminal
    hop: int
    where: str
    path: str = ""
    append: bool = False  # the user's redirect appends (`>>`, `&>>`, `tee -a`): a fix line must append too
    # the hops to the shell that opens it (a Frame's chain, outermost first), so that its folder can be looked at there
    chain: tuple = field(default=(), compare=False)

    def describe(self) -> str:
        """In words, for evidence lines."""
        if self.kind == "file":
            return f"{self.path} on {self.where} (redirect parsed at hop {self.hop})"
        return {"ssh": f"the ssh channel of hop {self.hop}", "tty": f"the terminal allocated at hop {self.hop}",
                "pane": "a tmux/screen pane (gone when the command exits)", "null": "/dev/null",
                "mail": "mail from atd", "journal": "the systemd journal",
                "terminal": "your terminal"}.get(self.kind, self.kind)


@dataclass
class Frame:
    """What a shell (or an exec'd command) at one hop inherits from the hops before it."""

    where: str
    tty: bool
    fds: dict[int, Fd]
    chain: list[tuple[str, list[str]]]  # (the hop's target kind, its words), outermost first
    cwd: Optional[str] = None
    home: str = "your current directory"
    background_at: Optional[int] = None  # hop where a `&` detached the job's ancestor
    bg_holds_ssh: bool = False
    handoff: str = ""  # setsid -f, tmux, screen, at, systemd-run: survives the session
    nohup: bool = False
    launcher_hop: Optional[int] = None


@dataclass
class Job:
    """The command the whole line is for, as it finally runs."""

    argv: list[str]
    assignments: list[str]
    frame: Frame
    hop: int
    entry: Optional[tuple[list[str], list[str], Frame]] = None  # the typed command that ran a launcher
    intended: Optional[Frame] = None  # where the user meant it to run, when a shell cut the line short


@dataclass
class Analysis:
    """Everything `analyse` found."""

    hops: list[Hop] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    job: Optional[Job] = None
    corrected: Optional[str] = None



def base(word: str) -> str:
    """A command word's program name (`/usr/bin/python3` -> `python3`)."""
    return posixpath.basename(word)


def is_python(argv: list[str]) -> bool:
    """Whether argv starts a Python training process (python, torchrun, accelerate, ...)."""
    return bool(argv) and (base(argv[0]).startswith(PYTHONS))


def unbuffered(argv: list[str], assignments: list[str]) -> bool:
    """Whether a Python job writes its stdout unbuffered (-u, PYTHONUNBUFFERED), or is no Python at all."""
    if any(a.startswith("PYTHONUNBUFFERED=") for a in assignments):
        return True
    if not argv or not base(argv[0]).startswith("python"):
        return not argv or base(argv[0]) not in PYTHONS and not base(argv[0]).startswith("python")
    for a in argv[1:]:
        if not a.startswith("-") or a == "-m" or a == "-c":
            return False
        if "u" in a.lstrip("-") and not a.startswith("--"):
            return True
    return False



def add_finding(out: "Analysis", status: str, cause: str, hop: int, summary: str, details: str = "",
                fix: str = "") -> None:
    """Record a finding once."""
    f = Finding(status, cause, hop, summary, details, fix)
    if f not in out.findings:
        out.findings.append(f)

