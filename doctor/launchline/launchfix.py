"""Conclusions about the job at the end of the launch path, and the one corrected line to copy."""

from __future__ import annotations

import posixpath
from typing import Optional

from dfdoctor import causes
from dfdoctor.launchline.hops import (
    LOCAL,
    Analysis,
    Fd,
    Finding,
    Frame,
    Job,
    add_finding,
    base,
    is_python,
    unbuffered,
)
from dfdoctor.shellquote import join, quote
from dfdoctor.targets.registry import kind_for
from dfdoctor.lazy_re import compile_later


def pick_job(jobs: list[Job]) -> Optional[Job]:
    """The training command: the last Python-like command, else the last command found."""
    py = [j for j in jobs if is_python(j.argv)]
    return (py or jobs or [None])[-1]


def judge(analysis: Analysis, job: Job, log: Optional[str]) -> None:
    """Conclusions about the job itself: where its log lands, whether it survives, buffering."""
    f = job.frame
    out, err = f.fds.get(1), f.fds.get(2)
    detached = f.background_at is not None or bool(f.handoff)

    def find(status: str, cause: str, hop: int, summary: str, details: str = "", fix: str = "") -> None:
        """Record one conclusion in the analysis."""
        add_finding(analysis, status, cause, hop, summary, details, fix)

    if out and out.kind == "file" and out.where != f.where:
        find("fail", causes.LOG_ELSEWHERE, out.hop, elsewhere(f.where, out),
             details=f"Looking for {out.path} in {f.where} finds nothing (or an older file). Output: "
                     f"{out.describe()}; errors: {err.describe() if err else '?'}.")
    if f.background_at is not None and not f.handoff and _tty_on_path(f):
        find("fail", causes.KILLED_ON_SESSION_EXIT, f.background_at,
             "`&` inside a session with a terminal (ssh -t): when that shell exits the terminal hangs up, "
             "and the background job gets SIGHUP before it is settled (with or without nohup)",
             details="Measured on lxc-attach over ssh -t: every `... &` form died or raced; `nohup setsid -f CMD "
                     "</dev/null >LOG 2>&1` followed by a pause, and `tmux new -d`, survived; without -t they all "
                     "survive.")
    elif f.bg_holds_ssh and not f.handoff and not _tty_on_path(f):
        find("warn", causes.KILLED_ON_SESSION_EXIT, f.background_at or job.hop,
             "the background job keeps ssh's stdout/stderr open: ssh does not return until the job ends, and "
             "Ctrl-C or a dropped connection then takes the job down",
             details="Redirect both stdout and stderr (and stdin from /dev/null) on the backgrounded command "
                     "itself, not on a part of an `&&` list.")
    if out and out.kind == "null" and f.handoff == "docker exec -d":
        find("warn", causes.LOG_ELSEWHERE, job.hop,
             "`docker exec -d` discards the job's output: without a redirect inside the container there is no log, "
             "and an error at start leaves no trace")
    if out and out.kind == "pane":
        find("warn", causes.LOG_ELSEWHERE, job.hop,
             f"the job's output goes to the {out.where} only: if it exits at once (missing module, bad path), "
             "the pane closes and the error is gone with it")
    relative = out and out.kind == "file" and not out.path.startswith(("/", "~", "$")) and out.where == f.where
    if relative and not (f.cwd and f.cwd.startswith("/")):
        find("warn", causes.LOG_ELSEWHERE, out.hop,
             f"relative log path {out.path}: it resolves against {f.cwd or f.home}, not necessarily where you "
             "will look", fix="Use an absolute log path.")
    if out and out.kind == "file" and not unbuffered(job.argv, job.assignments) and is_python(job.argv):
        find("warn", causes.OUTPUT_BUFFERED, job.hop,
             "Python block-buffers a redirected stdout: the log stays empty for a long while although the job "
             "works", fix="Run `python -u ...` or set PYTHONUNBUFFERED=1.")
    if not detached and f.where != LOCAL and out and out.kind in ("ssh", "tty"):
        find("warn", causes.KILLED_ON_SESSION_EXIT, job.hop,
             "the job runs in the foreground of the remote session: it lives only as long as this ssh connection",
             fix="Detach it as in the corrected line.")
    analysis.corrected = corrected_line(job, log)
    for i, fnd in enumerate(analysis.findings):
        if not fnd.fix:
            analysis.findings[i] = Finding(fnd.status, fnd.cause, fnd.hop, fnd.summary, fnd.details,
                                           analysis.corrected or "")


def elsewhere(job_where: str, out: Fd, folder_there: Optional[bool] = None) -> str:
    """What a redirect opened by another hop's shell than the job's does, in words: the shell there opens the file
    before the command that enters the job's place starts. Where the log's folder exists there, the log is written
    there; where it does not, that shell cannot open it and runs nothing at all (nothing lands anywhere).
    `folder_there`: whether the folder was seen there (None: not looked at: both cases are said)."""
    head = f"the job runs in {job_where}, but `> {out.path}` is parsed by the shell on {out.where}"
    folder = log_folder(out.path)
    if folder_there is True:
        return f"{head}, where {folder} exists: its log is written on {out.where}, not in {job_where}"
    if folder_there is False:
        return (f"{head}, where {folder} does not exist: that shell cannot open the log (No such file or directory), "
                f"so nothing starts in {job_where} and no log is written anywhere")
    return (f"{head}, before the job starts: if {folder} exists on {out.where}, the log is written there, not in "
            f"{job_where}; if it does not, that shell cannot open it and nothing starts")


def log_folder(path: str) -> str:
    """The folder a redirect's file is opened in, as the shell there names it (`.` for a bare file name)."""
    return posixpath.dirname(path) or "."


def _tty_on_path(f: Frame) -> bool:
    """Whether the job sits in a remote session that has a tty and was not handed off."""
    return f.tty and f.where != LOCAL and f.handoff == ""


# a path of plain words and variables (`$PWD/logs/x.log`, `${RUN}/x.log`): the shell expands it, as it did the user's
_PLAIN_VARS = compile_later(r"[\w./${}-]+")


def path_word(path: str) -> str:
    """The log's path as a shell word that names what the user's redirect named: `~/` and variables are left to
    the shell (quoted, `'$PWD/x.log'` and `'~/x.log'` would name other files), all else quoted."""
    if path.startswith("~/"):
        return "~/" + quote(path[2:])
    if "$" in path and _PLAIN_VARS.fullmatch(path):
        return f'"{path}"'
    return quote(path)


def corrected_line(job: Job, log: Optional[str]) -> str:
    """The launch line that survives the session and logs where you look, through the same hops."""
    argv, assignments, frame = job.argv, job.assignments, job.frame
    if job.entry:
        argv, assignments, frame = job.entry
    out = frame.fds.get(1)
    if job.intended is not None:
        frame = job.intended
    cwd = frame.cwd
    path = log or (out.path if out and out.kind == "file" else None)
    inner = job.frame.fds.get(1)
    # a line that appends to its log keeps appending: `>` would empty the user's log when the fix is run
    append = bool(out and out.kind == "file" and out.append and path == out.path)
    if not path and job.entry and inner is not None and inner.kind == "file":
        # The launcher already sends the job's output to its log; the launcher's own messages (a failing
        # `source`, a missing folder) go next to the launcher, so neither truncates the other.
        launcher = next((a for a in argv if a.endswith(".sh")), argv[-1])
        path = posixpath.splitext(launcher)[0] + ".out"
    elif not path and inner is not None and inner.kind == "file":
        path, append = inner.path, inner.append
        if not path.startswith(("/", "~", "$")) and job.frame.cwd and job.frame.cwd.startswith("/"):
            path = posixpath.join(job.frame.cwd, path)
    if path and not path.startswith(("/", "~", "$")):
        path = posixpath.join(cwd, path) if cwd and cwd.startswith("/") else path
    path = path or "/tmp/train.log"
    argv = list(argv)
    if is_python(job.argv) and not unbuffered(job.argv, job.assignments):
        if job.entry is None and base(argv[0]).startswith("python"):
            argv.insert(1, "-u")
        else:
            assignments = [*assignments, "PYTHONUNBUFFERED=1"]
    line = " ".join([*assignments, "nohup setsid -f", join(argv), "</dev/null", f"{'>>' if append else '>'}{path_word(path)}", "2>&1"])
    if cwd:
        line = f"cd {quote(cwd)} && {line}"
    for scheme, prefix in reversed(frame.chain):
        if kind_for(scheme).hop_takes_one_string:
            line = f"{join(prefix)} {quote(line)}"
        else:
            line = f"{join(prefix)} sh -c {quote(line)}"
    return line

