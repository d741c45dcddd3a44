"""The findings CI formats report (github, sarif, gitlab): each problem once, the most important first, with the
file and line dfdoctor knows for it and a fingerprint that stays the same from one run to the next.

A check that found several problems (three missing requirements) gives one finding each. A finding that quotes
a traceback is reported at the innermost frame of the user's own code (not the standard library's, not an
installed package's). Where a finding names no file, it is reported against the training script (or the
launcher) the command names, line 1; failing that, against `dfdoctor` itself, so a consumer that insists on a
path (GitLab) still gets one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from dfdoctor import causes
from dfdoctor.model import CheckRecord, Report, Result, Status
from dfdoctor.lazy_re import compile_later

NO_FILE = "dfdoctor"
# `path/to/file.py:12` as dfdoctor writes it in summaries and evidence (imports.smoke's module line, a
# requirements line, a launcher line); the extension keeps times ("0.13 s") and URLs ("host:22") out.
_FILE_LINE = compile_later(r"(?<![\w/.~-])(?P<path>(?:~|\.{1,2})?/?(?:[\w.+-]+/)*[\w.+-]+\.(?:py|pyw|sh|bash|zsh|"
                           r"sbatch|slurm|txt|toml|cfg|ini|ya?ml|json|in|env)):(?P<line>\d+)\b")
_PROBLEM_STATUSES = (Status.ERROR, Status.TIMEOUT, Status.FAIL, Status.WARN)


@dataclass(frozen=True)
class Finding:
    """One problem, ready for a CI format."""

    check_id: str
    title: str
    status: Status
    cause: Optional[str]
    summary: str
    fix: str
    target: Optional[str]
    path: str
    line: int
    located: bool  # whether path/line came from the finding itself (else the fallback)
    silenced: Optional[str]
    fingerprint: str

    @property
    def severity_rank(self) -> tuple:
        """Sort key, most important first: unsilenced, launch blockers, then by status."""
        return (self.silenced is None, self.cause in causes.LAUNCH_BLOCKERS, self.status.rank)


def base_dir() -> Path:
    """Paths are made relative to the CI's checkout (GITHUB_WORKSPACE, CI_PROJECT_DIR), else to here."""
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.environ.get("CI_PROJECT_DIR") or os.getcwd())


def relative(path: str, cwd: Optional[str], base: Path) -> str:
    """`path` (relative to the job's `cwd` when not absolute) as a path under `base` when it is inside it."""
    p = Path(path).expanduser()
    if not p.is_absolute() and cwd:
        p = Path(cwd) / p
    try:
        return p.resolve(strict=False).relative_to(base.resolve()).as_posix() if p.is_absolute() else p.as_posix()
    except ValueError:
        return p.as_posix()


def found_location(texts: list[str]) -> Optional[tuple[str, int]]:
    """The first `file:line` in the texts, in order."""
    for t in texts:
        m = _FILE_LINE.search(t or "")
        if m and int(m.group("line")) > 0:
            return m.group("path"), int(m.group("line"))
    return None


# a traceback's frame, `File "/path/train.py", line 6, in main`
_FRAME = compile_later(r'File "(?P<path>[^"\n]+)", line (?P<line>\d+)')
# how a verdict names the line it blames (diagnose/blame.py): "at /job/train.py, line 6 (`...`)"
_BLAMED = compile_later(r'(?P<path>/[^\s,"`\']+\.py), line (?P<line>\d+)')
# where installed code and the standard library live: not the user's own frame
_NOT_THEIRS = compile_later(r"(?:/(?:site|dist)-packages/|/lib/python\d[\d.]*/|^<|/<frozen )")


def user_frame(texts: list[str]) -> Optional[tuple[str, int]]:
    """The innermost frame of the user's own code in a traceback quoted by the texts: where their code raised
    (line 6 of train.py), not where the launch began, nor a library's line deep below it."""
    found = None
    for pattern in (_BLAMED, _FRAME):  # a traceback's own frames, where quoted, win over the verdict's words
        for t in texts:
            for m in pattern.finditer(t or ""):
                if not _NOT_THEIRS.search(m.group("path")) and int(m.group("line")) > 0:
                    found = (m.group("path"), int(m.group("line")))
    return found


def fallback_path(report: Report, rec: CheckRecord) -> Optional[str]:
    """The file the launch is about: the script the check parsed, else the command's script, else its launcher."""
    launch = rec.data.get("launch") if isinstance(rec.data.get("launch"), dict) else rec.data
    for key in ("script", "launcher"):
        if isinstance(launch, dict) and isinstance(launch.get(key), str) and launch.get(key):
            return launch[key]
    for word in report.command:
        if isinstance(word, str) and word.endswith((".py", ".sh", ".sbatch")):
            return word
    return None


def fingerprint(check_id: str, cause: Optional[str], status: Status, target: Optional[str], path: str,
                summary: str) -> str:
    """Stable across runs: numbers (times, sizes, pids) and the temporary parts of paths do not count."""
    words = re.sub(r"\d+(?:\.\d+)?", "#", summary)
    words = re.sub(r"/tmp/[^\s:'\"]+", "/tmp/…", words)
    key = "\x1f".join([check_id, cause or status.value, target or "", path, words])
    import hashlib  # here: only the reports that list findings (github, gitlab, sarif) fingerprint them
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


def _problems(rec: CheckRecord) -> Iterator[Result]:
    """Each problem a record holds: its findings at warn or worse, else the record itself."""
    if rec.status not in _PROBLEM_STATUSES:
        return
    found = [f for f in rec.findings if f.status in _PROBLEM_STATUSES]
    if found:
        yield from found
    else:
        yield Result(rec.status, rec.summary, rec.cause, rec.details, rec.fix, tuple(rec.evidence), rec.data)


def findings(report: Report) -> list[Finding]:
    """Every problem of the report, most important first (stable within the same importance)."""
    base = base_dir()
    job_cwd = report.environment.get("cwd")
    out: list[Finding] = []
    for rec in report.checks:
        for res in _problems(rec):
            here = found_location([res.summary, *res.evidence, res.fix, res.details]) \
                or user_frame([*res.evidence, res.details])
            if here:
                path, line, located = here[0], here[1], True
            else:
                path, line, located = fallback_path(report, rec) or NO_FILE, 1, False
            if path != NO_FILE:
                path = relative(path, job_cwd if not rec.target else None, base)
            out.append(Finding(rec.id, rec.title or rec.id, res.status, res.cause, res.summary, res.fix or rec.fix,
                               rec.target, path, line, located, rec.silenced,
                               fingerprint(rec.id, res.cause, res.status, rec.target, path, res.summary)))
    if report.mode in ("launch", "status") and report.verdict.state in ("failed", "unknown") \
            and not any(f.cause == report.verdict.cause and f.cause for f in out):
        v = report.verdict
        here = user_frame([v.summary, *v.evidence])  # a crash: the user's own line, as the verdict names it
        path, line = here or (fallback_path(report, CheckRecord(id="", phase="", status=Status.FAIL, summary="")), 1)
        path = relative(path, job_cwd, base) if path else NO_FILE
        out.append(Finding(f"{report.mode}.verdict", "What happened to the job", Status.FAIL, v.cause, v.summary,
                           v.fix, None, path, line, here is not None, None,
                           fingerprint(f"{report.mode}.verdict", v.cause, Status.FAIL, None, path, v.summary)))
    out.sort(key=lambda f: f.severity_rank, reverse=True)
    return out


def level(f: Finding) -> str:
    """error, warning or note, as GitHub and SARIF name them."""
    if f.silenced:
        return "note"
    return "warning" if f.status == Status.WARN else "error"


def fix_word(state: str) -> str:
    """What a verdict's `fix` is called: a fix for a job that failed or could not be judged, the next step for
    one that runs, is pending or is fine ("Follow it with tail -f" fixes nothing)."""
    return "fix" if state in ("failed", "unknown") else "next"
