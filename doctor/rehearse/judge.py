"""What a rehearsal saw, as findings: each one observed (the sentinel's own report, the shell's own words, a
lookup at that hop), so each may fail the gate. And the facts, in words, for the evidence."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Optional

from dfdoctor import causes
from dfdoctor.rehearse.runner import Rehearsal
from dfdoctor.lazy_re import compile_later

_MISSING = compile_later(r"No such file or directory|[Nn]onexistent directory|Directory nonexistent|can't create")
_DENIED = compile_later(r"Permission denied|Read-only file system")
# How nohup, setsid, a shell, lxc-attach and docker say that a program is not there.
_NOT_FOUND = compile_later(r"failed to (?:run command|execute) ['\"]?([\w./+-]+)|([\w./+-]+): (?:command )?not found|"
                           r"exec(?:utable file not found.*?|: )\"?([\w./+-]+)\"?: (?:executable file not found|No such file)|"
                           r"Failed to exec \"([\w./+-]+)\"")


@dataclass(frozen=True)
class Observed:
    """One observed problem: its cause, where it happened, and the words that show it."""

    cause: str
    where: str
    summary: str
    details: str = ""
    path: Optional[str] = None  # the file it is about, absolute where its folder is known (a log that failed)


def _user_path(path: str, suffix: str) -> str:
    """A renamed log's path as the user named it."""
    return path[:-len(suffix)] if suffix and path.endswith(suffix) else path


def _said(text: str, needle: str) -> list[str]:
    """The lines of `text` that mention `needle`."""
    return [ln.strip() for ln in text.splitlines() if needle and needle in ln]


def findings(r: Rehearsal, expected_log: Optional[str] = None) -> list[Observed]:
    """The problems the rehearsal observed (none when the job started, stayed alive and logged as asked)."""
    plan = r.plan
    if plan is None or plan.job is None or r.unobservable:
        return []
    job, out = plan.job, []
    suffix = plan.suffix
    words_everywhere = r.output + "\n" + "\n".join(head for p in r.places for _, head in p.logs.values())
    for log in plan.logs:
        # what the shell said may be in a log of the line (a launcher's redirect fails into the launcher's output)
        lines = _said(words_everywhere, log.renamed)
        shown = "; ".join(ln.replace(suffix, "") for ln in lines)
        if lines and _MISSING.search(" ".join(lines)):
            folder = posixpath.dirname(log.path) or "."
            if log.absolute and log.absolute != log.path:  # `cd code` then `> outputs/x.log`: say which folder
                folder += f" ({posixpath.dirname(log.absolute)})"
            # why, in the default text (issue 39: it was said only under -v)
            meant = (f" (`> {log.typed}` is read by the shell on {log.where} before the command that enters "
                     f"{job.where.split(' on ')[0]} starts: that command runs no shell of its own)"
                     ) if log.where != job.where else ""
            out.append(Observed(causes.LOG_DIR_MISSING, log.where,
                                f"the shell on {log.where} could not open the log {log.typed}: the folder {folder} "
                                f"does not exist there, so nothing was started{meant}",
                                f"It said: {shown}.", log.absolute))
        elif lines and _DENIED.search(" ".join(lines)):
            out.append(Observed(causes.LOG_NOT_WRITABLE, log.where,
                                f"the shell on {log.where} may not write the log {log.typed}, so nothing was started",
                                f"It said: {shown}."))
    place = r.job_place
    if out:
        return out
    if not r.started:
        word = job.interpreter
        have = place.have if place else {}
        said = [ln for ln in words_everywhere.splitlines() if word in ln and re.search(
            r"not found|No such file|failed to (run|execute)|executable file not found", ln)]
        if have.get(word) == "" and said:
            others = [w for w in ("python3", "python") if w != word and have.get(w)]
            also = f" ({', '.join(others)} does)" if others else ""
            uses = f" The fix uses {others[0]}, the interpreter that exists there." if others else ""
            out.append(Observed(causes.COMMAND_NOT_FOUND, job.where,
                                f"`{word}` does not exist in {job.where}{also}: the job cannot start",
                                f"It said: {_plain(said[-1], suffix)}.{uses}"))
            return out
        if said:
            out.append(Observed(causes.COMMAND_NOT_FOUND, job.where, f"the job could not start in {job.where}",
                                f"It said: {_plain(said[-1], suffix)}"))
            return out
        missing = _NOT_FOUND.search(words_everywhere)
        if missing:
            what = next(g for g in missing.groups() if g)
            out.append(Observed(causes.COMMAND_NOT_FOUND, job.where,
                                f"`{what}` does not exist where your line runs it: the job cannot start",
                                f"It said: {_plain(missing.group(0), suffix)}"))
            return out
        error = _error_said(r.output, suffix)
        if error:  # the line itself stopped, and said why (tmux: "duplicate session: NAME")
            out.append(Observed(causes.EXITED_EARLY, job.where,
                                f"the line stopped before the job started; it said: {error}",
                                "The rehearsal ran the line as you typed it; the job never started."))
            return out
        out.append(Observed(causes.KILLED_ON_SESSION_EXIT, job.where,
                            "the job never got to run: the session ended first and took it down with it",
                            "The line returned, and nothing of the job remained: no process, no output, not even "
                            "its log file." + (_held(r) if r.held else "")))
        return out
    start, end = place.start or {}, place.end or {}
    if start.get("script_found") is False:
        out.append(Observed(causes.COMMAND_NOT_FOUND, job.where,
                            f"the script {start.get('script')} is not there: the job starts in {start.get('cwd')} in "
                            f"{job.where}, where it does not exist",
                            "The rehearsal ran in the same folder the job would; give the script's absolute path, "
                            "or `cd` to its folder first."))
    if end.get("how") == "signal":
        out.append(Observed(causes.KILLED_ON_SESSION_EXIT, job.where,
                            f"the job was killed by {end.get('signal')} when the session that started it ended "
                            f"({end.get('after_s')} s after it started)", _held(r)))
    elif end.get("how") == "write-failed":
        out.append(Observed(causes.KILLED_ON_SESSION_EXIT, job.where,
                            "the job's output went to the session's terminal; when the session ended, its next "
                            f"print failed ({end.get('error')}) and it died, as your program would", _held(r)))
    elif not r.alive:
        out.append(Observed(causes.KILLED_ON_SESSION_EXIT, job.where,
                            "the job was gone a second after the session ended, without a word (SIGKILL)",
                            _held(r)))
    fd1 = (start.get("fds") or [{}, {}])[1]
    if fd1.get("kind") == "file" and fd1.get("visible_here") is False:
        path = _user_path(fd1.get("target", "?"), suffix)
        opened = next((lg.where for lg in plan.logs if posixpath.basename(lg.typed) == posixpath.basename(path)),
                      "another host")
        out.append(Observed(causes.LOG_ELSEWHERE, job.where,
                            f"the job runs in {job.where}, but its output goes to {path} on {opened}: looking for "
                            f"it in {job.where} finds nothing",
                            f"The `>` was read by the shell on {opened}, not in {job.where}."))
    elif fd1.get("kind") in ("tty", "socket", "pipe", "null") and expected_log and \
            not _written_by_the_line(plan, fd1, expected_log):
        out.append(Observed(causes.LOG_ELSEWHERE, job.where,
                            f"the job's output goes to {_fd_words(fd1, suffix)}, not to the log {expected_log}"))
    elif fd1.get("kind") == "file" and expected_log:
        path = _user_path(fd1.get("target", ""), suffix)
        if posixpath.normpath(path) != posixpath.normpath(posixpath.join(start.get("cwd", "/"), expected_log)):
            out.append(Observed(causes.LOG_ELSEWHERE, job.where,
                                f"the job's output goes to {path}, not to the log {expected_log}"))
    return out


def _written_by_the_line(plan, fd1: dict, expected_log: str) -> bool:
    """Whether the job's output reaches the log by another way than its own descriptor: screen's -Logfile writes
    it from the terminal the job writes to (R7), or the line's `> /proc/1/fd/1` was pointed at /dev/null by the
    rehearsal (R4: dfdoctor's own substitute is not the user's mistake)."""
    if fd1.get("kind") == "null":
        return any("the rehearsal wrote to /dev/null instead" in why for _, why in plan.not_rehearsed)
    name = posixpath.basename(expected_log)
    return any(lg.what == "screen's log" and posixpath.basename(lg.typed) == name for lg in plan.logs)


_ERROR_WORDS = compile_later(r"duplicate session|error|not found|denied|No such|cannot|can't|failed|usage:|invalid|"
                             r"unknown option|refused|not permitted", re.I)


def _error_said(output: str, suffix: str) -> str:
    """The last line of the terminal that reads as an error (a command's own words), with the rehearsal's names
    taken out."""
    lines = [ln.strip() for ln in output.splitlines() if _ERROR_WORDS.search(ln)]
    return _plain(lines[-1], suffix) if lines else ""


def _held(r: Rehearsal) -> str:
    """Words for a session that did not return by itself."""
    return (" The session did not return by itself (the job's output held it open); it was ended as Ctrl-C "
            "and closing the window would.") if r.held else ""


def _plain(line: str, suffix: str) -> str:
    """A line the rehearsal saw, with its own renaming taken out."""
    return line.replace(suffix, "").strip()


def _fd_words(fd: dict, suffix: str) -> str:
    """Where one descriptor pointed, in words."""
    kind = fd.get("kind")
    if kind == "file":
        where = "" if fd.get("visible_here", True) else " (a file of another host)"
        return _user_path(fd.get("target", "?"), suffix) + where
    return {"tty": "the session's terminal", "socket": "the ssh channel (a socket)", "pipe": "a pipe",
            "null": "/dev/null"}.get(kind or "", fd.get("closed") and "nowhere (closed)" or kind or "?")


def facts(r: Rehearsal) -> list[str]:
    """What the rehearsal saw, in words, one line each (for the evidence)."""
    plan = r.plan
    if plan is None:
        return [f"not rehearsed: {r.unobservable}"]
    lines = [f"rehearsed as: {plan.line}"]
    if r.unobservable:
        return lines + [f"could not observe: {r.unobservable}"]
    lines.append("the session " + (f"returned after {r.returned_s:.1f} s" if r.returned_s is not None and not r.held
                                   else "did not return by itself: ended as Ctrl-C would"))
    p = r.job_place
    if r.started and p and p.start:
        s = p.start
        fds = s.get("fds") or [{}, {}, {}]
        lines.append(f"the job started in {plan.job.where if plan.job else '?'} (host {s.get('host')}"
                     + (f", a {s.get('container')} container" if s.get("container") else "") + f"), cwd "
                     f"{s.get('cwd')}, uid {s.get('uid')}, interpreter {s.get('python')}")
        lines.append(f"stdout: {_fd_words(fds[1], plan.suffix)}; stderr: {_fd_words(fds[2], plan.suffix)}")
        lines.append(f"session {s.get('sid')}, process group {s.get('pgid')}, terminal {s.get('tty') or 'none'}, "
                     f"SIGHUP {'ignored (nohup)' if s.get('sighup_ignored') else 'not ignored'}")
        end = p.end or {}
        lines.append("after the session ended: " + ("still alive" if r.alive else
                     f"killed by {end['signal']}" if end.get("how") == "signal" else
                     f"died writing its output ({end.get('error')})" if end.get("how") == "write-failed" else
                     "gone"))
    else:
        lines.append("the job never started")
    for place in r.places:
        found = {posixpath.basename(p) for p, (size, _) in place.logs.items() if size is not None}
        for path, (size, _) in place.logs.items():
            if size is None and posixpath.basename(path) in found:
                continue  # looked for relative to the wrong folder; the sentinel said where it really was
            lines.append(f"log {_user_path(path, plan.suffix)} on {place.where}: "
                         + ("not created" if size is None else f"{size} bytes written by the rehearsal"))
    for cmd, why in plan.not_rehearsed:
        lines.append(f"not rehearsed: {cmd} ({why})")
    if r.output.strip():
        lines.append("the terminal showed: " + _plain(" | ".join(r.output.strip().splitlines()[-3:]), plan.suffix))
    if r.wall:
        lines.append(r.wall)
    lines.append(f"rehearsal time: {r.seconds:.1f} s")
    return lines


def passed(r: Rehearsal) -> bool:
    """Whether a rehearsed line works: the job started, outlived its session and wrote to a log it can see."""
    if not r.started or not r.alive or r.unobservable or r.plan is None:
        return False
    fd1 = ((r.job_place.start or {}).get("fds") or [{}, {}])[1]
    received = any((size or 0) > 0 for p in r.places for size, _ in p.logs.values())
    return fd1.get("kind") == "file" and fd1.get("visible_here") is True and received and not findings(r)
