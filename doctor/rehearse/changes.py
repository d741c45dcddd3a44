"""What a fix changed of the user's line, and why: one clause per change, each from what a rehearsal saw
(`python` -> `python3`: not in container 200; `cd /workspace`: the job starts in /root)."""

from __future__ import annotations

from typing import Optional

from dfdoctor.rehearse import pause
from dfdoctor.rehearse.runner import Rehearsal


def said(r: Rehearsal, tried: Rehearsal, *, folder: Optional[str] = None, started_in: Optional[str] = None) -> list[str]:
    """The clauses for the fix `tried` rehearsed, against the user's line `r` rehearsed. `started_in`: where a
    rehearsal saw the job start when the line gave it no folder."""
    job = r.plan.job
    out = []
    place = r.job_place
    have = place.have if place else {}
    fixed = tried.plan.job if tried.plan else None
    if fixed is not None and fixed.interpreter != job.interpreter and have.get(job.interpreter) == "":
        out.append(f"`{job.interpreter}` → `{fixed.interpreter}`: there is no {job.interpreter} in {job.where}")
    if folder and not (job.cwd and job.cwd.startswith("/")) and job.script and not job.script.startswith("/"):
        start = started_in or ((place.start or {}).get("cwd") if place else None)
        was = f"the job starts in {start}" if start else f"a session in {job.where} starts in its user's home"
        out.append(f"`cd {folder}`: {was}, where {job.script} is not; {folder} holds it")
    for lg in r.plan.logs:
        if not lg.dynamic and lg.where != job.where:
            out.append(f"the redirect moved inside {job.where}: your `{lg.op} {lg.typed}` was read by the shell on "
                       f"{lg.where}, before {job.where.split(' on ')[0]} was entered")
            break
    out.append("`nohup setsid -f … </dev/null`: the job leaves the session that started it"
               + ("; `sleep 1`: lets it get away before the hop ends what it started"
                  if pause.needed(job.chain) else ""))
    if job.launcher is None and job.runner == "python" and "-u" not in job.argv[1:job.argv.index(job.script) if job.script in job.argv
                                                         else None]:
        out.append("`-u`: Python writes each line to the log at once, not in blocks")
    return out


def folder_missing(folder: str, where: str) -> str:
    """The clause for a log folder the fix needs created first."""
    return (f"run first `mkdir -p {folder}` in {where}: the log's folder is not there (not run by dfdoctor, which "
            f"never creates your folders; the line was rehearsed with its log in /tmp)")



def venv(typed: str, python: str, system: str, missing: list[str]) -> str:
    """The clause for the project's venv in place of the system's interpreter (rehearse/venvs.py)."""
    return (f"`{typed}` → `{python}`: the project's venv; the system {system} has no "
            f"{', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}")
