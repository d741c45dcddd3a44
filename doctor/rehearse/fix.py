"""The one fix of a report: composed once from what the rehearsal saw, rehearsed the same way, and given only
when its rehearsal passed; otherwise what was tried and why it did not work."""

from __future__ import annotations

import posixpath
import time
from functools import partial
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor import causes
from dfdoctor.shellquote import join_typed, quote_typed
from dfdoctor.rehearse import changes, judge, pause, rewrite, venvs
from dfdoctor.rehearse.runner import Rehearsal, rehearse

RUN_FIRST = "run first: "  # a line of a fix to run before the line itself
CHANGED = "changed: "  # the line of a fix that says what changed of the user's line, and why


@dataclass
class Fix:
    """The line to copy (only when `works`), or what was tried and why it failed."""

    line: str
    works: bool
    why_not: str = ""
    rehearsal: Optional[Rehearsal] = None
    first: list[str] = field(default_factory=list)  # lines to run before it (a folder to create), at the hop
    changes: list[str] = field(default_factory=list)  # what was changed of the user's line, and why: a clause each
    interpreter: dict = field(default_factory=dict)  # {"from": "python", "to": "python3"} where it swapped one

    def words(self) -> str:
        """The fix as a report prints it: the lines to run first (each marked), the line, what changed."""
        if self.works:
            return "\n".join([*(f"{RUN_FIRST}{ln}" for ln in self.first), self.line,
                              *([CHANGED + "; ".join(self.changes)] if self.changes else [])])
        return f"no working line found; tried: {self.line} ({self.why_not})" if self.line else \
            f"no working line found: {self.why_not}"


def compose(r: Rehearsal, log: Optional[str] = None, *, folder: Optional[str] = None,
            python: Optional[str] = None) -> Optional[str]:
    """A line that starts the same job at the same place, detached from every session, logging to an absolute
    path, with an interpreter that exists there; None when there is nothing to compose it from. `folder`: the
    folder to start the job in (a candidate of the search), else the one the line or the rehearsal gives;
    `python`: the interpreter to run it with (a venv's, a candidate of the search)."""
    plan = r.plan
    if plan is None or plan.job is None:
        return None
    job = plan.job
    if job.launcher is not None:  # the job came out of a launcher script: the fix starts the launcher
        return _launcher_line(job.launcher, r, log)
    interpreter = python or _interpreter(r)
    cwd = folder or _folder(r)
    typed = _log_path(r, log, cwd)
    argv = [interpreter, *job.argv[1:]]
    options = argv[1:argv.index(job.script)] if job.script in argv else argv[1:]
    if job.runner == "python" and "-u" not in options:
        argv.insert(1, "-u")
    core = f"nohup setsid -f {join_typed(argv)} </dev/null >>{quote_typed(typed)} 2>&1"
    if pause.needed(job.chain):
        # lxc-attach (pct exec) given a terminal ends the attached process group as soon as its command
        # returns, which can catch the forked job before its setsid(): a pause lets it get away (pause.py)
        core += "; sleep 1"
    # what the line set up for the job at its shell (a venv's activate, exports) comes along, in order
    core = " && ".join([*job.setup, core]) if job.setup else core
    if cwd:
        core = f"cd {quote_typed(cwd)} && {core}"
    return rewrite.typed_line(job.chain, core)


def _interpreter(r: Rehearsal) -> str:
    """The line's interpreter word, or the one that exists at the job's place when it does not."""
    job = r.plan.job
    place = r.job_place
    have = place.have if place else {}
    if job.runner == "python" and have.get(job.interpreter) == "":
        return next((w for w in ("python3", "python") if have.get(w)), job.interpreter)
    return job.interpreter


def _folder(r: Rehearsal) -> Optional[str]:
    """The folder the line gives the job (its absolute `cd`, its absolute script's), else where the rehearsal saw
    it start."""
    job = r.plan.job
    if job.cwd and job.cwd.startswith("/"):
        return job.cwd
    if job.script and job.script.startswith("/"):
        return posixpath.dirname(job.script)
    place = r.job_place
    return ((place.start or {}) if place else {}).get("cwd")


def _log_path(r: Rehearsal, log: Optional[str], cwd: Optional[str]) -> str:
    """The log the fixed line appends to: the one asked for or typed, made absolute against the job's folder."""
    job = r.plan.job
    typed = log or next((lg.path for lg in r.plan.logs if not lg.dynamic), None)
    if typed is None:
        stem = posixpath.splitext(posixpath.basename(job.script or "train"))[0]
        typed = f"{stem}.log"
    if not typed.startswith("/"):
        base_dir = job.cwd if job.cwd and job.cwd.startswith("/") else cwd
        typed = posixpath.join(base_dir, typed) if base_dir else typed
    return typed


def _launcher_line(launcher, r: Rehearsal, log: Optional[str]) -> str:
    """The launcher itself, detached from every session, its output appended to an absolute log."""
    plan = r.plan
    cwd = launcher.cwd if launcher.cwd and launcher.cwd.startswith("/") else None
    # the log of the line that ran the launcher (never one of the launcher's own redirects: those are its job's)
    outer = [lg.path for lg in plan.logs if not lg.dynamic and not lg.in_launcher] if plan else []
    inner = {lg.typed for lg in plan.logs if lg.in_launcher} if plan else set()
    typed = (outer[0] if outer else None) or (log if log and log not in inner and not any(
        lg.absolute == log for lg in plan.logs if lg.in_launcher) else None) or \
        posixpath.splitext(launcher.script or "launch")[0] + ".out"
    if not typed.startswith("/") and not cwd and launcher.script and launcher.script.startswith("/"):
        cwd = posixpath.dirname(launcher.script)
    if not typed.startswith("/") and cwd:
        typed = posixpath.join(cwd, typed)
    core = f"nohup setsid -f {join_typed(launcher.argv)} </dev/null >>{quote_typed(typed)} 2>&1"
    if pause.needed(launcher.chain):
        core += "; sleep 1"
    core = " && ".join([*launcher.setup, core]) if launcher.setup else core
    if cwd:
        core = f"cd {quote_typed(cwd)} && {core}"
    return rewrite.typed_line(launcher.chain, core)


# at most this many candidate lines are rehearsed (each ~3 s), and none is begun after SEARCH_S: the search stays
# within launch.path's own bound (40 s) on a loaded machine
MAX_TRIES = 4
SEARCH_S = 18.0


def find(r: Rehearsal, log: Optional[str] = None, *, cwd: Optional[str] = None, launcher: Optional[str] = None,
         launcher_text: Optional[str] = None, folder: Optional[str] = None, ahead=None) -> Optional[Fix]:
    """Search for the line that works, each candidate rehearsed: the folders that may hold the script (the
    line's own, the log's, the folders the line names, `folder` (--cwd), where a session starts), with the
    interpreter that exists there; a log folder missing at the job's place becomes a line to run first. None
    when the rehearsal could not observe anything to fix. `ahead` (ahead.Ahead): a candidate already rehearsed
    beside `r`, taken for that very line."""
    if r.plan is None or r.unobservable:
        return None
    line = compose(r, log)
    if line is None:
        return Fix("", False, "the line's job could not be found")
    first: Optional[Fix] = None
    seen = (r.job_place.start or {}) if r.job_place else {}
    started_in = seen.get("cwd")  # where the job starts without a `cd`, for the clause that says why one was added
    began = time.monotonic()
    where = {"cwd": cwd, "launcher": launcher, "launcher_text": launcher_text, "ahead": ahead}
    tries = 0
    for place in candidates(r, log, folder)[:MAX_TRIES]:
        if place is None and seen.get("script_found") is False:
            continue  # the user's own line showed the script is not where a session starts
        if first is not None and time.monotonic() - began > SEARCH_S:
            break
        fx = _try(r, log, place, started_in, **where)
        tries += 1
        if fx.works:
            # the project's venv in place of a system python that lacks the script's modules: one more rehearsal,
            # within the search's bounds
            within = tries < MAX_TRIES and time.monotonic() - began <= SEARCH_S
            return (within and venvs.instead(r, fx, partial(_try, r, log, place, started_in, **where))) or fx
        first = first or fx
        tried = fx.rehearsal
        at = (tried.job_place.start or {}) if tried and tried.job_place else {}
        started_in = started_in or (at.get("cwd") if place is None else None)
        if at.get("script_found") is False or (place and tried and not tried.started and
                                               any("cd" in ln and place in ln for ln in tried.output.splitlines())):
            continue  # not this folder: the script is not in it, or it does not exist there
        break  # the script was found (or no rehearsal got that far): another folder changes nothing
    return first or Fix(line, False, "no folder to start the job in holds the script")


def candidates(r: Rehearsal, log: Optional[str], folder: Optional[str]) -> list[Optional[str]]:
    """The folders to start the job in, most likely first. A relative script is looked for in the line's own
    folder, the log's, the folders the line names and --cwd; None is "where the rehearsal saw it start"."""
    job = r.plan.job
    if job.launcher is not None or not job.script or job.script.startswith("/") or not job.script_is_file or \
            (job.cwd and job.cwd.startswith("/")):
        return [None]
    logs = [lg.path for lg in r.plan.logs if not lg.dynamic] + ([log] if log else [])
    # the log's folder and the one above it (`> /workspace/x/train.log` for /workspace/train.py)
    logs += [posixpath.dirname(p) for p in logs if p.startswith("/")]
    named = [w for w in r.line.replace("'", " ").replace('"', " ").split() if w.startswith("/") and len(w) > 1]
    found = [posixpath.dirname(p) for p in logs if p.startswith("/")] + \
        [w.rstrip("/") if not posixpath.splitext(w)[1] else posixpath.dirname(w) for w in named] + \
        ([folder] if folder and folder.startswith("/") else [])
    folders = [f for f in found if f and f != "/" and not f.startswith(("/dev", "/proc", "/usr/bin", "/bin"))
               and not posixpath.basename(f).startswith("python")]  # a venv's interpreter is no folder
    # where a session starts comes first: what the user meant, and where it starts is then seen, not guessed
    return [None, *dict.fromkeys(folders)]


def _try(r: Rehearsal, log: Optional[str], folder: Optional[str], started_in: Optional[str], *,
         python: Optional[str] = None, ahead=None, **where) -> Fix:
    """Compose the line for one folder (and interpreter: `python`, a venv's) and rehearse it; a log folder missing
    at the job's place is rehearsed with the log in /tmp and given as a line to run first (dfdoctor never creates
    your folders)."""
    line = compose(r, log, folder=folder, python=python)
    assert line is not None
    job = r.plan.job
    chosen = python or _interpreter(r)
    swap = {"from": job.interpreter, "to": chosen} if chosen != job.interpreter else {}
    tried = (ahead.take(line) if ahead is not None else None) or rehearse(line, **where)
    if judge.passed(tried):
        return Fix(line, True, rehearsal=tried, changes=changes.said(r, tried, folder=folder, started_in=started_in),
                   interpreter=swap)
    problems = judge.findings(tried, log)
    why = problems[0].summary if problems else (tried.unobservable or "its rehearsal did not keep the job alive "
                                                "and logging")
    if problems and problems[0].cause == causes.LOG_DIR_MISSING and problems[0].where == job.where:
        made = problems[0].path or _log_path(r, log, folder or _folder(r))
        missing = posixpath.dirname(made)
        make = rewrite.typed_line(job.chain, f"mkdir -p {quote_typed(missing)}")
        again = _with_log_in_tmp(r, log, folder, problems[0], where, python)
        if again is not None and judge.passed(again):
            return Fix(line, True, rehearsal=again, first=[make], interpreter=swap,
                       changes=[changes.folder_missing(missing, job.where), *changes.said(r, again, folder=folder,
                                                                                     started_in=started_in)])
        why += f"; create the folder first (`{make}`), dfdoctor never creates your folders"
        tried = again or tried  # what the line did once past the folder (its script found or not) decides the search
    return Fix(line, False, why, tried)


def _with_log_in_tmp(r: Rehearsal, log: Optional[str], folder: Optional[str], missing, where: dict,
                     python: Optional[str] = None) -> Optional[Rehearsal]:
    """The same fix rehearsed with the log whose folder is missing moved to /tmp: all of it but the folder is then
    seen to work. In a launcher, its redirect's path is swapped in the text the rehearsal runs (the user's script
    is never touched); None where that path is not written once in it."""
    job = r.plan.job
    failed = next((lg for lg in r.plan.logs if lg.absolute == missing.path or lg.typed == missing.path), None)
    stand_in = "/tmp/" + posixpath.basename(missing.path or _log_path(r, log, folder or _folder(r)))
    if job.launcher is None:
        return rehearse(compose(r, stand_in, folder=folder, python=python) or "", **where)
    text = where.get("launcher_text") or ""
    typed = failed.typed if failed is not None else None
    if not typed or text.count(typed) != 1:
        return None
    line = compose(r, log, folder=folder)
    return rehearse(line or "", **{**where, "launcher_text": text.replace(typed, stand_in)})


def for_typed_line(line: str, log: Optional[str] = None, folder: Optional[str] = None) -> Optional[Fix]:
    """The user's typed line rehearsed and, where it was seen to fail, the line that works searched for (what
    `launch` offers when it will not start a job read out of that line); None where nothing was seen to fail."""
    r = rehearse(line)
    if r.plan is None or r.unobservable or not judge.findings(r, log):
        return None
    return find(r, log, folder=folder)


def offer_working_line(ctx, report) -> None:
    """A launch refused for a job read out of a typed line: the user's line rehearsed, and the line seen to work
    (the fix search of launch.path) put first among the fixes, as the line to paste."""
    folder = str(ctx.cwd) if not ctx.target.runs_here and str(ctx.cwd).startswith("/") else None
    fx = for_typed_line(ctx.typed_line, str(ctx.log) if ctx.log else None, folder)
    if fx is None or not fx.works:
        return
    v = report.verdict
    v.evidence = [*v.evidence, "your line was rehearsed: the fix's line was seen to start the job and fill its log"]
    v.fix = fx.words()  # the blockers' own fixes follow it (render.text.fix_sources)
