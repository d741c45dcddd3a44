"""Follow a launch line hop by hop (your shell, ssh, the host's shell, `pct exec`, the container) and say
which shell parses each redirect and `&`, where a tty is allocated, and what that does to the job.

Pure Python, no infrastructure: the facts it encodes were measured on real OpenSSH and real lxc-attach
(`docs/targets.md`). The result is a list of hops, a list of findings (each with its cause id and hop) and
one corrected line to copy.
"""

from __future__ import annotations

import errno
import os
import posixpath
from typing import Optional

from dfdoctor import causes
from dfdoctor.launchline.wrappers import read_shell, read_through
from dfdoctor.launchline.hops import (
    BUILTINS,
    LOCAL,
    NOT_A_JOB,
    SHELLS,
    SSH_OPTS_WITH_ARG,
    Analysis,
    Fd,
    Finding,
    Frame,
    Hop,  # noqa: F401 (Finding: re-exported)
    Job,
    add_finding,
    base,
    is_python,
)
from dfdoctor.launchline.launchfix import judge, pick_job
from dfdoctor.safefile import read_head
from dfdoctor.shell import (
    Command,
    Pipeline,
    ShellSyntaxError,
    join,
    parse,
    quote,
)
from dfdoctor.targets.registry import TargetKind, hop_kind, kind_for

__all__ = ["analyse", "read_launcher", "Analysis", "Finding", "Hop", "Job", "is_python"]


class _Walker:
    """Walks the hops, collecting rows and findings."""

    def __init__(self, launcher: Optional[str], launcher_text: Optional[str]) -> None:
        """Start with no hops; `launcher` is followed when a command runs it."""
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
        add_finding(self.out, status, cause, hop, summary, details, fix)

    # -- a shell parses text ----------------------------------------------------------------------------
    def shell(self, text: str, frame: Frame, parsed_by: str, note: str = "", is_script: bool = False) -> None:
        """A shell at `frame.where` parses `text`: walk each and-or list it finds."""
        shown = f"({len(text.splitlines())} lines)" if is_script else text.strip()
        h = self.hop(frame.where, parsed_by, frame.tty, shown, note)
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
        """Whether argv (wrappers peeled) looks like the training job or the launcher."""
        argv = self._strip_wrappers(argv)[0]
        return bool(argv) and base(argv[0]) not in NOT_A_JOB and (is_python(argv) or self._is_launcher(argv))

    def _is_launcher(self, argv: list[str]) -> bool:
        """Whether argv runs the --launcher script."""
        return bool(self.launcher) and any(base(a) == base(self.launcher) for a in argv[:3])

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
                holds = [sub.fds] + ([frame.fds] if len(p.commands) > 1 else [])
                sub.bg_holds_ssh = any(fds_.get(fd, Fd("null", h, "")).kind == "ssh" for fds_ in holds for fd in (1, 2))
        if not argv:
            return None
        name = base(argv[0])
        if name == "cd":
            self._cd(cmd, argv, frame, h, errexit, is_script)
            return None
        kind = _hop_kind(argv)
        if kind is not None and kind.hop_takes_one_string:
            return self._ssh(argv, sub, h)
        if kind is not None:
            return self._container(argv, sub, h, cmd)
        self.run(argv, cmd.assignments, sub, h)
        return None

    def _apply_redirects(self, frame: Frame, cmd: Command, h: int, p: Pipeline, ci: int) -> dict[int, Fd]:
        """The job's descriptors after this command's redirects (and a `| tee FILE`)."""
        fds = dict(frame.fds)
        if cmd.sep in ("|", "|&") and ci + 1 < len(p.commands):
            nxt = p.commands[ci + 1].argv
            files = [a for a in nxt[1:] if not a.startswith("-")]
            if nxt[:1] == ["tee"] and files:
                appends = any(a in ("-a", "--append") or (a.startswith("-") and not a.startswith("--") and "a" in a)
                              for a in nxt[1:])
                fds[1] = Fd("file", h, frame.where, files[0], append=appends, chain=tuple(frame.chain))
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
                    fds[fd] = Fd("file", h, frame.where, r.target, append=r.op in (">>", "&>>"),
                                 chain=tuple(frame.chain))
        return fds

    def _strip_wrappers(self, argv: list[str]) -> tuple[list[str], list[str]]:
        """Read through nohup, setsid, env, sudo, taskset, ... (launchline/wrappers.py); return the real command and
        the wrappers seen. A wrapper option the table does not know stops there: what follows is not guessed at."""
        through = read_through(argv)
        seen = ["setsid -f" if name == "setsid" and any(w in ("-f", "--fork") or (w.startswith("-") and not
                                                                                   w.startswith("--") and "f" in w)
                                                          for w in words[1:]) else name
                for name, words, _ in through.wrappers]
        if through.unknown:
            return argv[through.wrappers[-1][2] + len(through.wrappers[-1][1]) if through.wrappers else 0:], seen
        return argv[through.index:], seen

    # -- hops that move the command -----------------------------------------------------------------------
    def _ssh(self, argv: list[str], frame: Frame, h: int) -> Optional[Frame]:
        """An ssh hop: parse its options, note the tty, follow the remote command into the login shell."""
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
        chain = frame.chain + [(_hop_kind(argv).scheme, ["ssh", *opts, dest])]
        sub = Frame(host, tty, fds, chain, None, f"the home directory of {user or 'your user'} on {host}",
                    frame.background_at, frame.bg_holds_ssh, frame.handoff, frame.nohup, frame.launcher_hop)
        how = "ssh -tt: a tty is forced" if ttys >= 2 else ("ssh -t: a tty (your terminal is one)" if tty else
                                                              "ssh without -t: no tty, output over the channel")
        self.shell(remote, sub, f"login shell of {user or 'you'} on {host} (sh -c)", note=how)
        return sub

    def _container(self, argv: list[str], frame: Frame, h: int, cmd: Command) -> Optional[Frame]:
        """A `pct exec`/`lxc-attach`/`docker exec` hop: no shell, the words are exec'd as they are."""
        kind = _hop_kind(argv)
        name, first = kind.hop_split(argv)
        if name is None:
            return None
        where = f"container {name} on {frame.where}" if frame.where != LOCAL else f"container {name}"
        prefix, inner = argv[:first], argv[first:]
        sub = Frame(where, frame.tty or kind.hop_gives_tty(prefix),
                    dict(frame.fds), frame.chain + [(kind.scheme, prefix)], None,
                    "the directory lxc-attach starts in (your cwd if it exists in the container, else /)",
                    frame.background_at, frame.bg_holds_ssh, frame.handoff, frame.nohup, frame.launcher_hop)
        desc, tool = kind.hop_note, kind.hop_tool
        if kind.hop_detaches(prefix):
            # the docker daemon runs it, outside any session; whatever it prints is discarded
            sub.handoff = "docker exec -d"
            sub.fds = {1: Fd("null", h, where), 2: Fd("null", h, where)}
            desc += "; -d: the daemon runs it detached and discards its output"
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
        call = read_shell(inner) if base(first) in SHELLS else None
        if call and call.command_string and call.script_at is not None:  # options read by name (`--rcfile F`)
            self.shell(inner[call.script_at], sub, f"{base(first)} -c in {where}")
            return sub
        self.run(inner, [], sub, hh)
        return sub

    def _cd(self, cmd: Command, argv: list[str], frame: Frame, h: int, errexit: bool, is_script: bool) -> None:
        """A `cd`: remember the directory; warn when it is not joined with `&&`."""
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
        name = base(argv[0])
        if name == "tmux" and len(argv) > 1 and argv[1] in ("new", "new-session"):
            self._tmux(argv, frame, h)
            return
        if name == "screen":
            self._screen(argv, frame, h)
            return
        call = read_shell(argv) if name in SHELLS else None
        if call and call.command_string and call.script_at is not None:  # options read by name (`--rcfile F`)
            self.shell(argv[call.script_at], frame, f"{name} -c on {frame.where}")
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
        """`tmux new`: the command runs in a pane of the tmux server, which survives the session."""
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
        """`screen -dm`: the words run in a screen window (exec'd, no shell)."""
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



def container_split(argv: list[str]) -> tuple[Optional[str], int, str]:
    """For `pct exec`, `lxc-attach` and `docker exec` lines: the container, the index of the first word it execs
    (len(argv) when there is none), and the hop's target kind."""
    kind = _hop_kind(argv)
    return (*kind.hop_split(argv), kind.scheme)


def _hop_kind(argv: list[str]) -> Optional[TargetKind]:
    """The target kind whose hop `argv` is; `podman exec` is read as docker's (same words, no target kind)."""
    if base(argv[0]) == "podman" and argv[1:2] == ["exec"]:
        return kind_for("docker")
    return hop_kind(argv)


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
    job = pick_job(w.jobs)
    w.out.job = job
    if job:
        judge(w.out, job, log)
    return w.out



# the most of a --launcher file read: a launch script is a few KiB; a file the user names by mistake (a checkpoint,
# /dev/zero, a FIFO) must neither grow dfdoctor nor hang it (safefile.read_head)
LAUNCHER_LIMIT = 1 << 20


def read_launcher(path: str) -> str:
    """The launcher's text (it is only read, never run); OSError when it cannot be read, is no regular file, or
    is larger than any launch script (LAUNCHER_LIMIT)."""
    where = os.path.expanduser(path)
    os.stat(where)  # a missing file says so in the OS's own words
    data = read_head(where, LAUNCHER_LIMIT)
    if data is None:
        raise OSError(errno.EINVAL, "not a regular file that can be read")
    if len(data) > LAUNCHER_LIMIT:
        raise OSError(errno.EFBIG, f"larger than {LAUNCHER_LIMIT >> 20} MiB: not a launch script")
    return data.decode("utf-8", "replace")
