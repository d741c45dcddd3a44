"""Follow a launch line hop by hop (your shell, ssh, the host's shell, `pct exec`, the container) and say
which shell parses each redirect and `&`, where a tty is allocated, and what that does to the job.

Pure Python, no infrastructure: the facts it encodes were measured on real OpenSSH and real lxc-attach
(`docs/targets.md`). The result is a list of hops, a list of findings (each with its cause id and hop) and
one corrected line to copy.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Optional

from doctor import causes

from .shell import Command, Pipeline, ShellSyntaxError, join, parse, quote

# Commands that run the next word as a program, possibly after options of their own.
WRAPPERS = {"nohup", "setsid", "exec", "env", "sudo", "nice", "stdbuf", "timeout", "time", "command",
            "ionice", "chrt", "taskset", "numactl", "caffeinate", "unbuffer"}
SHELLS = {"sh", "bash", "dash", "zsh", "ash", "ksh", "busybox"}
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
    chain: list[tuple[str, list[str]]]
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


def _base(word: str) -> str:
    return posixpath.basename(word)


def is_python(argv: list[str]) -> bool:
    """Whether argv starts a Python training process (python, torchrun, accelerate, ...)."""
    return bool(argv) and (_base(argv[0]).startswith(PYTHONS))


def _unbuffered(argv: list[str], assignments: list[str]) -> bool:
    if any(a.startswith("PYTHONUNBUFFERED=") for a in assignments):
        return True
    if not argv or not _base(argv[0]).startswith("python"):
        return not argv or _base(argv[0]) not in PYTHONS and not _base(argv[0]).startswith("python")
    for a in argv[1:]:
        if not a.startswith("-") or a == "-m" or a == "-c":
            return False
        if "u" in a.lstrip("-") and not a.startswith("--"):
            return True
    return False


class _Walker:
    """Walks the hops, collecting rows and findings."""

    def __init__(self, launcher: Optional[str], launcher_text: Optional[str]) -> None:
        self.out = Analysis()
        self.launcher = launcher
        self.launcher_text = launcher_text
        self.launcher_done = False
        self.jobs: list[Job] = []

    # -- hops -------------------------------------------------------------------------------------------
    def hop(self, where: str, parsed_by: str, tty: bool, command: str, note: str = "") -> int:
        """Add a hop row; return its index."""
        h = Hop(len(self.out.hops), where, parsed_by, tty, command, note)
        self.out.hops.append(h)
        return h.index

    def find(self, status: str, cause: str, hop: int, summary: str, details: str = "", fix: str = "") -> None:
        """Record a finding once."""
        f = Finding(status, cause, hop, summary, details, fix)
        if f not in self.out.findings:
            self.out.findings.append(f)

    # -- a shell parses text ----------------------------------------------------------------------------
    def shell(self, text: str, frame: Frame, parsed_by: str, note: str = "", is_script: bool = False) -> None:
        """A shell at `frame.where` parses `text`: walk each and-or list it finds."""
        h = self.hop(frame.where, parsed_by, frame.tty, text.strip() if not is_script else f"({len(text.splitlines())} lines)", note)
        try:
            pipelines = parse(text)
        except ShellSyntaxError as exc:
            self.find("fail", causes.COMMAND_NOT_FOUND, h, f"{parsed_by} cannot parse this: {exc}",
                      fix="Close every quote; test the line with `bash -n`.")
            return
        errexit = any(c.argv[:2] in (["set", "-e"], ["set", "-eu"], ["set", "-euo"], ["set", "-ex"])
                      or (c.argv[:1] == ["set"] and any(a.startswith("-") and "e" in a for a in c.argv[1:]))
                      for p in pipelines for c in p.commands)
        crossed: Optional[Frame] = None
        for pi, p in enumerate(pipelines):
            for ci, cmd in enumerate(p.commands):
                before = len(self.jobs)
                moved = self.command(cmd, p, ci, frame, h, errexit, is_script)
                if crossed and self._job_like(cmd.argv):
                    self.find("fail", causes.LOG_ELSEWHERE, h,
                              f"`{cmd.text()}` runs on {frame.where}, not on {crossed.where}: {parsed_by} ended the "
                              f"remote command at the operator before it",
                              details="Only the quoted part after ssh / pct exec crosses the hop; `&&`, `;` and "
                                      "redirects outside the quotes belong to this shell: put the whole remote "
                                      "command inside one quoted string.")
                    for j in self.jobs[before:]:
                        j.intended = crossed
                if moved:
                    crossed = moved
                if cmd.argv[:1] == ["exec"] and len(cmd.argv) > 1 and pi + 1 < len(pipelines):
                    later = pipelines[pi + 1:]
                    status = "fail" if any(self._job_like(c.argv) or any(r.to_file for r in c.redirects)
                                           for q in later for c in q.commands) else "warn"
                    self.find(status, causes.LOG_ELSEWHERE, h,
                              f"`exec` on line {cmd.line} replaces the shell: the {len(later)} command(s) after it "
                              f"never run, with their redirects",
                              details="Lines after it: " + "; ".join(q.text() for q in later[:3]),
                              fix="Put the redirect on the exec line itself (`exec CMD >LOG 2>&1`), or drop `exec`.")
                    return

    def _job_like(self, argv: list[str]) -> bool:
        argv = self._strip_wrappers(argv)[0]
        return bool(argv) and _base(argv[0]) not in NOT_A_JOB and (is_python(argv) or self._is_launcher(argv))

    def _is_launcher(self, argv: list[str]) -> bool:
        return bool(self.launcher) and any(_base(a) == _base(self.launcher) for a in argv[:3])

    # -- one simple command -----------------------------------------------------------------------------
    def command(self, cmd: Command, p: Pipeline, ci: int, frame: Frame, h: int, errexit: bool,
                is_script: bool) -> Optional[Frame]:
        """Apply one command's redirects and `&`; follow it if it crosses a hop. Returns where it moved to."""
        fds = self._apply_redirects(frame, cmd, h, p, ci)
        bg = p.background
        sub = Frame(frame.where, frame.tty, fds, list(frame.chain), frame.cwd, frame.home, frame.background_at,
                    frame.bg_holds_ssh, frame.handoff, frame.nohup, frame.launcher_hop)
        if bg:
            # A backgrounded list runs in a subshell that keeps this shell's descriptors until it ends.
            holder = fds if len(p.commands) == 1 else frame.fds
            sub.background_at = h
            sub.bg_holds_ssh = any(holder.get(fd, Fd("null", h, "")).kind == "ssh" for fd in (1, 2))
        argv, wrappers = self._strip_wrappers(cmd.argv)
        if "setsid -f" in wrappers:
            sub.handoff = sub.handoff or "setsid -f"
        if "nohup" in wrappers:
            sub.nohup = True
            if all(fds.get(fd, Fd("null", h, "")).kind == "tty" for fd in (1,)):
                sub.fds = dict(fds)
                sub.fds[1] = sub.fds[2] = Fd("file", h, frame.where, "nohup.out")
            if bg:
                sub.bg_holds_ssh = any(sub.fds.get(fd, Fd("null", h, "")).kind == "ssh" for fd in (1, 2)) \
                    or (len(p.commands) > 1 and any(frame.fds.get(fd, Fd("null", h, "")).kind == "ssh" for fd in (1, 2)))
        if not argv:
            return None
        name = _base(argv[0])
        if name == "cd":
            self._cd(cmd, argv, frame, h, errexit, is_script)
            return None
        if name == "ssh":
            return self._ssh(argv, sub, h)
        if (name == "pct" and argv[1:2] == ["exec"]) or name == "lxc-attach" or (name in ("docker", "podman") and argv[1:2] == ["exec"]):
            return self._container(argv, sub, h, cmd)
        self.run(argv, cmd.assignments, sub, h)
        return None

    def _apply_redirects(self, frame: Frame, cmd: Command, h: int, p: Pipeline, ci: int) -> dict[int, Fd]:
        fds = dict(frame.fds)
        if cmd.sep in ("|", "|&") and ci + 1 < len(p.commands):
            nxt = p.commands[ci + 1].argv
            files = [a for a in nxt[1:] if not a.startswith("-")]
            if nxt[:1] == ["tee"] and files:
                fds[1] = Fd("file", h, frame.where, files[0])
            if cmd.sep == "|&" and nxt[:1] == ["tee"] and files:
                fds[2] = fds[1]
        for r in cmd.redirects:
            for fd in r.fds:
                if fd not in (1, 2):
                    continue
                if r.op in (">&", "<&") and r.target.isdigit():
                    fds[fd] = fds.get(int(r.target), Fd("null", h, ""))
                elif r.target == "/dev/null":
                    fds[fd] = Fd("null", h, frame.where)
                elif r.op.startswith(">") or r.op.startswith("&"):
                    fds[fd] = Fd("file", h, frame.where, r.target)
        return fds

    def _strip_wrappers(self, argv: list[str]) -> tuple[list[str], list[str]]:
        """Peel nohup, setsid, env, sudo, ... off argv; return the real command and the wrappers seen."""
        seen: list[str] = []
        i = 0
        while i < len(argv) and _base(argv[i]) in WRAPPERS:
            w = _base(argv[i])
            i += 1
            flags = []
            while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
                flags.append(argv[i])
                takes = (w == "nice" and argv[i] == "-n") or (w == "sudo" and argv[i] in ("-u", "-g")) \
                    or (w == "taskset" and argv[i] == "-c") or (w in ("ionice",) and argv[i] in ("-c", "-n"))
                i += 2 if takes else 1
            if i < len(argv) and argv[i] == "--":
                i += 1
            if w == "env":
                while i < len(argv) and "=" in argv[i]:
                    i += 1
            if w in ("timeout", "taskset", "chrt") and i < len(argv):
                i += 1
            if w == "setsid" and any("f" in f.lstrip("-") or f == "--fork" for f in flags):
                seen.append("setsid -f")
            else:
                seen.append(w)
        return argv[i:], seen

    # -- hops that move the command -----------------------------------------------------------------------
    def _ssh(self, argv: list[str], frame: Frame, h: int) -> Optional[Frame]:
        ttys, i, opts, dest = 0, 1, [], None
        no_tty = False
        while i < len(argv):
            a = argv[i]
            if a == "--":
                i += 1
                break
            if not a.startswith("-") or a == "-":
                break
            j = 1
            while j < len(a):
                c = a[j]
                if c == "t":
                    ttys += 1
                elif c == "T":
                    no_tty = True
                elif c in SSH_OPTS_WITH_ARG:
                    if j + 1 < len(a):
                        opts.append(a)
                    else:
                        opts += [a, argv[i + 1] if i + 1 < len(argv) else ""]
                        i += 1
                    break
                else:
                    opts.append("-" + c)
                j += 1
            i += 1
        if i >= len(argv):
            return None
        dest = argv[i]
        remote = " ".join(argv[i + 1:])
        user, _, host = dest.rpartition("@")
        host = host or dest
        tty = not no_tty and (ttys >= 2 or (ttys == 1 and frame.tty))
        if not remote:
            self.hop(host, "ssh (interactive login)", tty, dest, "no remote command: nothing to follow")
            return None
        fds = {fd: (Fd("ssh", h, host) if v.kind in ("tty", "terminal", "ssh") else v) for fd, v in frame.fds.items()}
        if tty:
            fds = {fd: (Fd("tty", h, host) if v.kind == "ssh" else v) for fd, v in fds.items()}
        chain = frame.chain + [("ssh", ["ssh", *opts, dest])]
        sub = Frame(host, tty, fds, chain, None, f"the home directory of {user or 'your user'} on {host}",
                    frame.background_at, frame.bg_holds_ssh, frame.handoff, frame.nohup, frame.launcher_hop)
        how = "ssh -tt: a tty is forced" if ttys >= 2 else ("ssh -t: a tty (your terminal is one)" if tty else
                                                              "ssh without -t: no tty, output over the channel")
        self.shell(remote, sub, f"login shell of {user or 'you'} on {host} (sh -c)", note=how)
        return sub

    def _container(self, argv: list[str], frame: Frame, h: int, cmd: Command) -> Optional[Frame]:
        name, inner, tool = _container_argv(argv)
        if name is None:
            return None
        where = f"container {name} on {frame.where}" if frame.where != LOCAL else f"container {name}"
        prefix = argv[:len(argv) - len(inner)]
        sub = Frame(where, frame.tty or (tool == "docker" and any(a in ("-t", "-it", "-ti") for a in prefix)),
                    dict(frame.fds), frame.chain + [("exec", prefix)], None,
                    "the directory lxc-attach starts in (your cwd if it exists in the container, else /)",
                    frame.background_at, frame.bg_holds_ssh, frame.handoff, frame.nohup, frame.launcher_hop)
        desc = {"pct": "pct exec = exec lxc-attach -n VMID -- CMD: no shell; the words are exec'd as they are",
                "lxc-attach": "lxc-attach: no shell; the words are exec'd as they are",
                "docker": "docker exec: no shell; the words are exec'd as they are"}[tool]
        hh = self.hop(where, "nobody (exec'd directly)", sub.tty, join(inner), desc)
        if not inner:
            return sub
        first = inner[0]
        if first == "cd" and len(inner) > 1:
            sub.cwd = inner[1]
        if first in BUILTINS or first in ("nohup",) and len(inner) > 1 and inner[1] in BUILTINS:
            self.find("fail", causes.COMMAND_NOT_FOUND, hh,
                      f"`{first}` is a shell builtin, but {tool} runs no shell: exec of `{first}` fails",
                      details="Whatever follows it after `&&` or `;` is run by the shell of the previous hop, "
                              f"on {frame.where}.",
                      fix=f"{join(prefix)} sh -c {quote(join(inner) + ' && ...' if first == 'cd' else join(inner))}")
            return sub
        if any(c in first for c in " ;&|<>"):
            self.find("fail", causes.COMMAND_NOT_FOUND, hh,
                      f"{tool} gets one word {quote(first)} as the program name: no shell splits it",
                      fix=f"{join(prefix)} sh -c {quote(first)}")
            return sub
        if _base(first) in SHELLS and "-c" in "".join(a for a in inner[1:3] if a.startswith("-")):
            k = next(i for i, a in enumerate(inner) if a.startswith("-") and "c" in a)
            if k + 1 < len(inner):
                self.shell(inner[k + 1], sub, f"{_base(first)} -c in {where}")
                return sub
        self.run(inner, [], sub, hh)
        return sub

    def _cd(self, cmd: Command, argv: list[str], frame: Frame, h: int, errexit: bool, is_script: bool) -> None:
        target = argv[1] if len(argv) > 1 else "~"
        if cmd.sep == "&":
            self.find("warn", causes.LOG_ELSEWHERE, h, f"`cd {target} &` changes directory in a background "
                      "subshell only; the commands after it run where they were", fix=f"cd {quote(target)} && ...")
            return
        if cmd.sep in (";", "\n") and not (is_script and errexit):
            self.find("warn", causes.LOG_ELSEWHERE, h,
                      f"`cd {target}` is not joined with `&&`: if it fails, the job still starts, in the wrong "
                      "directory, and its relative paths (script, log) resolve there",
                      fix=f"cd {quote(target)} && ..." if not is_script else "Add `set -e` at the top, or "
                      f"`cd {quote(target)} || exit 1`.")
        if target.startswith("/"):
            frame.cwd = target
        elif frame.cwd:
            frame.cwd = posixpath.normpath(posixpath.join(frame.cwd, target))
        else:
            frame.cwd = target

    # -- the job ----------------------------------------------------------------------------------------
    def run(self, argv: list[str], assignments: list[str], frame: Frame, h: int) -> None:
        """A command is exec'd at this hop: follow tmux/screen/at hand-offs and the launcher; note the job."""
        argv, wrappers = self._strip_wrappers(argv)
        if "setsid -f" in wrappers:
            frame.handoff = frame.handoff or "setsid -f"
        if "nohup" in wrappers:
            frame.nohup = True
        if not argv:
            return
        name = _base(argv[0])
        if name == "tmux" and len(argv) > 1 and argv[1] in ("new", "new-session"):
            self._tmux(argv, frame, h)
            return
        if name == "screen":
            self._screen(argv, frame, h)
            return
        if name in SHELLS and len(argv) > 2 and argv[1].startswith("-") and "c" in argv[1]:
            self.shell(argv[2], frame, f"{name} -c on {frame.where}")
            return
        if name in NOT_A_JOB:
            return
        job = Job(list(argv), list(assignments), frame, h)
        if self._is_launcher(argv) and self.launcher_text is not None and not self.launcher_done:
            self.launcher_done = True
            before = len(self.jobs)
            lf = Frame(frame.where, frame.tty, dict(frame.fds), list(frame.chain), frame.cwd, frame.home,
                       frame.background_at, frame.bg_holds_ssh, frame.handoff, frame.nohup, h)
            self.shell(self.launcher_text, lf, f"bash running {self.launcher}", is_script=True)
            for j in self.jobs[before:]:
                j.entry = (list(argv), list(assignments), frame)
            if len(self.jobs) > before:
                return
        self.jobs.append(job)

    def _tmux(self, argv: list[str], frame: Frame, h: int) -> None:
        i, detached, cwd = 2, False, None
        while i < len(argv) and argv[i].startswith("-"):
            flag = argv[i]
            if "d" in flag and not flag.startswith("--"):
                detached = True
            if flag[-1] in "scnxyeEFtf" and flag not in ("-d", "-P", "-A", "-D", "-X"):
                if flag == "-c" and i + 1 < len(argv):
                    cwd = argv[i + 1]
                i += 1
            i += 1
        rest = argv[i:]
        where = f"tmux pane on {frame.where}"
        pane = Fd("pane", h, where)
        sub = Frame(where, True, {1: pane, 2: pane}, list(frame.chain), cwd or frame.cwd, frame.home,
                    None, False, "tmux" if detached else "", frame.nohup, frame.launcher_hop)
        if not detached:
            self.find("warn", causes.KILLED_ON_SESSION_EXIT, h, "`tmux new` without -d attaches to this session: "
                      "without a terminal it fails ('open terminal failed'), with one it lives only as long as it",
                      fix="tmux new -d -s train '...'")
        if not rest:
            self.hop(where, "tmux (an interactive shell)", True, "", "no command: an empty shell")
            return
        if len(rest) == 1:
            self.shell(rest[0], sub, f"tmux's default shell (sh -c) in a new pane on {frame.where}",
                       note="the pane closes when this command exits, unless remain-on-exit is set")
        else:
            hh = self.hop(where, "nobody (tmux execs the words)", True, join(rest))
            self.run(rest, [], sub, hh)

    def _screen(self, argv: list[str], frame: Frame, h: int) -> None:
        i, detached = 1, False
        while i < len(argv) and argv[i].startswith("-"):
            flag = argv[i]
            if flag in ("-dm", "-dmS", "-Dm", "-DmS") or flag == "-m" and "-d" in argv[1:i]:
                detached = True
            if flag.endswith("S") or flag in ("-c", "-L", "-Logfile", "-t"):
                i += 1 if flag != "-L" else 0
            i += 1
        rest = argv[i:]
        where = f"screen window on {frame.where}"
        pane = Fd("pane", h, where)
        sub = Frame(where, True, {1: pane, 2: pane}, list(frame.chain), frame.cwd, frame.home, None, False,
                    "screen" if detached else "", frame.nohup, frame.launcher_hop)
        if len(rest) == 1 and " " in rest[0]:
            self.find("fail", causes.COMMAND_NOT_FOUND, h, f"screen execs its words directly: {quote(rest[0])} "
                      "is taken as one program name", fix=f"screen -dmS train sh -c {quote(rest[0])}")
            return
        if rest:
            hh = self.hop(where, "nobody (screen execs the words)", True, join(rest),
                          "the window closes when this command exits")
            self.run(rest, [], sub, hh)


def _container_argv(argv: list[str]) -> tuple[Optional[str], list[str], str]:
    """For `pct exec`, `lxc-attach` and `docker exec` lines: the container, the argv it execs, the tool."""
    name = _base(argv[0])
    if name == "pct":
        if len(argv) < 3:
            return None, [], "pct"
        rest = argv[3:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return argv[2], rest, "pct"
    if name == "lxc-attach":
        i, cname = 1, None
        while i < len(argv) and argv[i] != "--":
            a = argv[i]
            if a in ("-n", "--name") and i + 1 < len(argv):
                cname = argv[i + 1]
                i += 2
                continue
            if a.startswith("--name="):
                cname = a.split("=", 1)[1]
            elif a.startswith("-n") and len(a) > 2:
                cname = a[2:]
            elif a in ("-P", "--lxcpath", "-e", "-s", "-v", "--set-var", "-f", "--rcfile", "-u", "-g"):
                i += 1
            i += 1
        return cname, argv[i + 1:] if i < len(argv) else [], "lxc-attach"
    i = 2
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys"):
            i += 1
        i += 1
    if i >= len(argv):
        return None, [], "docker"
    return argv[i], argv[i + 1:], "docker"


def analyse(shell_command: Optional[str] = None, launcher: Optional[str] = None,
            launcher_text: Optional[str] = None, log: Optional[str] = None) -> Analysis:
    """Explain `shell_command` (and the launcher it runs, if given) hop by hop; see the module docstring."""
    w = _Walker(launcher, launcher_text)
    term = Fd("terminal", 0, LOCAL)
    frame = Frame(LOCAL, True, {1: term, 2: term}, [], None)
    if shell_command:
        w.shell(shell_command, frame, "your shell", note="what you type")
    if launcher_text is not None and not w.launcher_done:
        w.launcher_done = True
        w.shell(launcher_text, Frame(LOCAL, True, {1: term, 2: term}, [], None), f"bash running {launcher}",
                note="not started by --shell-command; analysed as run from a terminal", is_script=True)
    job = _pick_job(w.jobs)
    w.out.job = job
    if job:
        _judge(w, job, log)
    return w.out


def _pick_job(jobs: list[Job]) -> Optional[Job]:
    """The training command: the last Python-like command, else the last command found."""
    py = [j for j in jobs if is_python(j.argv)]
    return (py or jobs or [None])[-1]


def _judge(w: _Walker, job: Job, log: Optional[str]) -> None:
    """Conclusions about the job itself: where its log lands, whether it survives, buffering."""
    f = job.frame
    out = f.fds.get(1)
    err = f.fds.get(2)
    detached = f.background_at is not None or bool(f.handoff)
    if out and out.kind == "file" and out.where != f.where:
        w.find("fail", causes.LOG_ELSEWHERE, out.hop,
               f"the redirect to {out.path} is parsed by the shell at hop {out.hop} on {out.where}: the job runs in "
               f"{f.where} but its log lands on {out.where}",
               details=f"Looking for {out.path} in {f.where} finds nothing (or an older file). Output: "
                       f"{out.describe()}; errors: {err.describe() if err else '?'}.")
    if f.background_at is not None and not f.handoff and _tty_on_path(w, f):
        w.find("fail", causes.KILLED_ON_SESSION_EXIT, f.background_at,
               f"`&` at hop {f.background_at} inside a tty session: when that shell exits the terminal hangs up, "
               f"and the background job gets SIGHUP before it is settled (with or without nohup)",
               details="Measured on lxc-attach over ssh -t: every `... &` form never started; `setsid nohup ... &` "
                       "raced and lost; `nohup setsid -f CMD </dev/null >LOG 2>&1` and `tmux new -d` survived.")
    elif f.bg_holds_ssh and not f.handoff and not _tty_on_path(w, f):
        w.find("warn", causes.KILLED_ON_SESSION_EXIT, f.background_at or job.hop,
               "the background job keeps ssh's stdout/stderr open: ssh does not return until the job ends, and "
               "Ctrl-C or a dropped connection then takes the job down",
               details="Redirect both stdout and stderr (and stdin from /dev/null) on the backgrounded command "
                       "itself, not on a part of an `&&` list.")
    if out and out.kind == "pane":
        w.find("warn", causes.LOG_ELSEWHERE, job.hop,
               f"the job's output goes to the {out.where} only: if it exits at once (missing module, bad path), "
               "the pane closes and the error is gone with it")
    if out and out.kind == "file" and not out.path.startswith(("/", "~", "$")) and out.where == f.where:
        base = f.cwd if f.cwd and f.cwd.startswith("/") else None
        if not base:
            w.find("warn", causes.LOG_ELSEWHERE, out.hop,
                   f"relative log path {out.path}: it resolves against {f.home if not f.cwd else f.cwd}, "
                   "not necessarily where you will look", fix="Use an absolute log path.")
    if out and out.kind == "file" and not _unbuffered(job.argv, job.assignments) and is_python(job.argv):
        w.find("warn", causes.OUTPUT_BUFFERED, job.hop,
               "Python block-buffers a redirected stdout: the log stays empty for a long while although the job "
               "works", fix="Run `python -u ...` or set PYTHONUNBUFFERED=1.")
    if not detached and f.where != LOCAL and out and out.kind in ("ssh", "tty"):
        w.find("warn", causes.KILLED_ON_SESSION_EXIT, job.hop,
               "the job runs in the foreground of the remote session: it lives only as long as this ssh "
               "connection", fix="Detach it as in the corrected line.")
    w.out.corrected = corrected_line(job, log)
    for i, fnd in enumerate(w.out.findings):
        if not fnd.fix:
            w.out.findings[i] = Finding(fnd.status, fnd.cause, fnd.hop, fnd.summary, fnd.details,
                                        w.out.corrected or "")


def _tty_on_path(w: _Walker, f: Frame) -> bool:
    return f.tty and f.where != LOCAL and f.handoff == ""


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
    if not path and job.entry and inner is not None and inner.kind == "file":
        # The launcher already sends the job's output to its log; the launcher's own messages (a failing
        # `source`, a missing folder) go next to the launcher, so neither truncates the other.
        launcher = next((a for a in argv if a.endswith(".sh")), argv[-1])
        path = posixpath.splitext(launcher)[0] + ".out"
    elif not path and inner is not None and inner.kind == "file":
        path = inner.path
        if not path.startswith(("/", "~", "$")) and job.frame.cwd and job.frame.cwd.startswith("/"):
            path = posixpath.join(job.frame.cwd, path)
    if path and not path.startswith(("/", "~", "$")):
        path = posixpath.join(cwd, path) if cwd and cwd.startswith("/") else path
    path = path or "/tmp/train.log"
    argv = list(argv)
    if is_python(job.argv) and not _unbuffered(job.argv, job.assignments):
        if job.entry is None and _base(argv[0]).startswith("python"):
            argv.insert(1, "-u")
        else:
            assignments = [*assignments, "PYTHONUNBUFFERED=1"]
    line = " ".join([*assignments, "nohup setsid -f", join(argv), "</dev/null", f">{quote(path)}", "2>&1"])
    if cwd:
        line = f"cd {quote(cwd)} && {line}"
    for kind, prefix in reversed(frame.chain):
        if kind == "exec":
            line = f"{join(prefix)} sh -c {quote(line)}"
        else:
            line = f"{join(prefix)} {quote(line)}"
    return line


def read_launcher(path: str) -> str:
    """The launcher's text (it is only read, never run)."""
    with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as fh:
        return fh.read()
