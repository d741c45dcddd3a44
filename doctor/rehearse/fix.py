"""The one fix of a report: composed once from what the rehearsal saw, rehearsed the same way, and given only
when its rehearsal passed; otherwise what was tried and why it did not work."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Optional

from dfdoctor import causes
from dfdoctor.shell import join, quote
from dfdoctor.rehearse import judge, rewrite
from dfdoctor.rehearse.runner import Rehearsal, rehearse
from dfdoctor.targets.registry import kind_for


@dataclass
class Fix:
    """The line to copy (only when `works`), or what was tried and why it failed."""

    line: str
    works: bool
    why_not: str = ""
    rehearsal: Optional[Rehearsal] = None

    def words(self) -> str:
        """The fix as a report prints it."""
        if self.works:
            return self.line
        return f"no working line found; tried: {self.line} ({self.why_not})" if self.line else \
            f"no working line found: {self.why_not}"


def compose(r: Rehearsal, log: Optional[str] = None) -> Optional[str]:
    """A line that starts the same job at the same place, detached from every session, logging to an absolute
    path, with an interpreter that exists there; None when there is nothing to compose it from."""
    plan = r.plan
    if plan is None or plan.job is None:
        return None
    job = plan.job
    if job.launcher is not None:  # the job came out of a launcher script: the fix starts the launcher
        return _launcher_line(job.launcher, r, log)
    place = r.job_place
    have = place.have if place else {}
    interpreter = job.interpreter
    if job.runner == "python" and have.get(interpreter) == "":
        interpreter = next((w for w in ("python3", "python") if have.get(w)), interpreter)
    seen = (place.start or {}) if place else {}
    cwd = job.cwd if job.cwd and job.cwd.startswith("/") else None
    if cwd is None and job.script and job.script.startswith("/"):
        cwd = posixpath.dirname(job.script)
    cwd = cwd or seen.get("cwd")
    typed = log or next((lg.typed for lg in plan.logs if not lg.dynamic), None)
    if typed is None:
        stem = posixpath.splitext(posixpath.basename(job.script or "train"))[0]
        typed = f"{stem}.log"
    if not typed.startswith("/"):
        base_dir = job.cwd if job.cwd and job.cwd.startswith("/") else cwd
        typed = posixpath.join(base_dir, typed) if base_dir else typed
    argv = [interpreter, *job.argv[1:]]
    options = argv[1:argv.index(job.script)] if job.script in argv else argv[1:]
    if job.runner == "python" and "-u" not in options:
        argv.insert(1, "-u")
    core = f"nohup setsid -f {join(argv)} </dev/null >>{quote(typed)} 2>&1"
    if any(kind_for(hop.kind).detach_needs_pause for hop in job.chain):
        # lxc-attach (pct exec) given a terminal ends the attached process group as soon as its command
        # returns, which can catch the forked job before its setsid(): a pause lets it get away (docs/targets.md)
        core += "; sleep 1"
    # what the line set up for the job at its shell (a venv's activate, exports) comes along, in order
    core = " && ".join([*job.setup, core]) if job.setup else core
    if cwd:
        core = f"cd {quote(cwd)} && {core}"
    return rewrite.typed_line(job.chain, core)


def _launcher_line(launcher, r: Rehearsal, log: Optional[str]) -> str:
    """The launcher itself, detached from every session, its output appended to an absolute log."""
    plan = r.plan
    cwd = launcher.cwd if launcher.cwd and launcher.cwd.startswith("/") else None
    # the log of the line that ran the launcher (the first redirect, read before the launcher's own)
    outer = [lg.typed for lg in plan.logs if not lg.dynamic] if plan else []
    typed = log or (outer[0] if outer else posixpath.splitext(launcher.script or "launch")[0] + ".out")
    if not typed.startswith("/") and not cwd and launcher.script and launcher.script.startswith("/"):
        cwd = posixpath.dirname(launcher.script)
    if not typed.startswith("/") and cwd:
        typed = posixpath.join(cwd, typed)
    core = f"nohup setsid -f {join(launcher.argv)} </dev/null >>{quote(typed)} 2>&1"
    if any(kind_for(hop.kind).detach_needs_pause for hop in launcher.chain):
        core += "; sleep 1"
    core = " && ".join([*launcher.setup, core]) if launcher.setup else core
    if cwd:
        core = f"cd {quote(cwd)} && {core}"
    return rewrite.typed_line(launcher.chain, core)


def find(r: Rehearsal, log: Optional[str] = None, *, cwd: Optional[str] = None, launcher: Optional[str] = None,
         launcher_text: Optional[str] = None) -> Optional[Fix]:
    """Compose the fix and rehearse it; None when the rehearsal could not observe anything to fix."""
    if r.plan is None or r.unobservable:
        return None
    line = compose(r, log)
    if line is None:
        return Fix("", False, "the line's job could not be found")
    tried = rehearse(line, cwd=cwd, launcher=launcher, launcher_text=launcher_text)
    if judge.passed(tried):
        return Fix(line, True, rehearsal=tried)
    problems = judge.findings(tried, log)
    why = problems[0].summary if problems else (tried.unobservable or "its rehearsal did not keep the job alive "
                                                "and logging")
    if problems and problems[0].cause == causes.LOG_DIR_MISSING:
        folder = next((posixpath.dirname(lg.typed) for lg in (tried.plan.logs if tried.plan else [])), "")
        why += f"; create the folder first (`mkdir -p {quote(folder)}` on {problems[0].where}), dfdoctor never creates " \
               "your folders" if folder else ""
    return Fix(line, False, why, tried)
