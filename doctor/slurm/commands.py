"""Slurm's command-line tools, run with a deadline, and their `Key=Value` output read into dicts."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional, Sequence

from dfdoctor.lazy_re import compile_later

TIMEOUT_S = 15.0
_KEY = compile_later(r"^[A-Za-z][A-Za-z0-9_:/.]*=")


@dataclass(frozen=True)
class Answer:
    """What one Slurm command printed, and whether it ran at all."""

    argv: tuple[str, ...]
    rc: Optional[int]  # None: not installed or timed out
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def said(self) -> str:
        """Its stderr (else stdout) in one line, for evidence."""
        return " ".join((self.err or self.out).split())[:400]


def run(argv: Sequence[str], timeout: float = TIMEOUT_S, stdin: Optional[str] = None,
        env: Optional[dict] = None, cwd: Optional[object] = None) -> Answer:
    """Run a Slurm command; a missing tool or a timeout is an Answer with rc None, never an exception."""
    if shutil.which(argv[0]) is None:
        return Answer(tuple(argv), None, "", f"{argv[0]}: not found on PATH (is this a Slurm submit host?)")
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                           input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Answer(tuple(argv), None, "", f"{' '.join(argv)}: no answer in {timeout:g} s")
    except OSError as exc:
        return Answer(tuple(argv), None, "", f"{argv[0]}: {exc}")
    return Answer(tuple(argv), p.returncode, p.stdout, p.stderr)


def available() -> bool:
    """Whether this host can submit jobs (sbatch and scontrol on PATH)."""
    return shutil.which("sbatch") is not None and shutil.which("scontrol") is not None


def keyvalues(text: str) -> dict[str, str]:
    """scontrol's `Key=Value Key2=Value with spaces` (one record, one or many lines) as a dict."""
    out: dict[str, str] = {}
    last = None
    for word in text.split():
        if _KEY.match(word):
            k, _, v = word.partition("=")
            out[k] = v
            last = k
        elif last is not None:  # a value with spaces (a Reason, a Command with arguments)
            out[last] += " " + word
    return out


def records(text: str) -> list[dict[str, str]]:
    """Several scontrol records (`-o`: one per line)."""
    return [keyvalues(line) for line in text.splitlines() if line.strip()]


def table(text: str) -> list[dict[str, str]]:
    """`sacct -P`/`sinfo`-style text with a header line and `|` between fields."""
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        return []
    head = lines[0].split("|")
    return [dict(zip(head, l.split("|"))) for l in lines[1:]]
