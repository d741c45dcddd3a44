"""Turn the user's launch line into the line a rehearsal runs: the same text, hop for hop, with four edits.

1. The training program's script becomes the sentinel's path (the interpreter word and the other arguments
   stay), so a missing `python` still shows and the sentinel runs where the job would.
2. Every file a redirect writes gets a suffix (`train.log` -> `train.log.dfdoctor-rh-TAG`): the folder, the
   host and the shell that opens it are the same, and the user's own log is never truncated.
3. Every `ssh` gets non-interactive options first (`BatchMode=yes`, a short `ConnectTimeout`, no
   ControlMaster): a password prompt or a host-key question fails at once instead of waiting for input.
4. A command that is neither plumbing (hops, detachers, `cd`, `export`, `source`, redirects) nor the job is
   replaced by `:` and listed as not rehearsed (docs/REHEARSAL: `git pull`, `pip install`, `mkdir -p`, ...).

The edits are spliced into the text where the words lie (shell.Word.start/end), so quoting, comments and
compound commands stay exactly as typed. A nested line (ssh's remote command, `sh -c`'s script, tmux's
command) is rewritten the same way and put back into its word: in place when the word's quotes map its
value one to one, else re-quoted, which a shell reads as the same word unless it held `$` or backquotes
(then the line is not rehearsed, and the reason is said).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor.launchline.hops import BUILTINS, PYTHONS, SHELLS, SSH_OPTS_WITH_ARG, base
from dfdoctor.shell import Command, ShellSyntaxError, Word, join, parse, quote
from dfdoctor.targets.registry import hop_kind, kind_for

SSH_CONFIG_ENV = "DFDOCTOR_SSH_CONFIG"
CONNECT_TIMEOUT_S = 5
# Plumbing that runs for real (REHEARSAL.md): builtins that change the shell's state or print, detachers.
KEPT = BUILTINS | {"true", "false", ":", "echo", "printf", "test", "[", "wait", "disown", "trap", "shopt",
                   "exit", "return", "local", "declare", "readonly", "umask", "ulimit"}
WRAPPERS = {"nohup", "setsid", "exec", "env", "nice", "stdbuf", "ionice", "taskset", "chrt", "numactl",
            "command", "time", "timeout"}
RUNNERS = ("torchrun", "accelerate", "deepspeed")
LAUNCHER_SUFFIXES = (".sh", ".bash")


class CannotRehearse(ValueError):
    """The line cannot be rewritten faithfully; the message says why, in words."""


@dataclass(frozen=True)
class Hop:
    """How a session reaches one place: `kind` is the hop's target kind (`ssh`: one string for a login shell;
    `pct`, `lxc`, `docker`: words, no shell)."""

    kind: str
    argv: tuple[str, ...]
    where: str


@dataclass
class Log:
    """A file a redirect of the line writes, renamed for the rehearsal."""

    typed: str  # the path as the user typed it (value)
    renamed: str
    chain: tuple[Hop, ...]
    where: str
    cwd: Optional[str]
    dynamic: bool = False


@dataclass
class Job:
    """The training command the sentinel stands in for."""

    argv: list[str]
    interpreter: str
    chain: tuple[Hop, ...]
    where: str
    cwd: Optional[str]
    script: Optional[str]
    runner: str = "python"
    setup: list[str] = field(default_factory=list)  # `. venv/bin/activate`, `export A=B` before it, at its shell
    script_is_file: bool = False  # `script` names a file (not `-m module` or `-c code`)
    launcher: Optional["Job"] = None  # the command that ran the launcher script the job was found in


@dataclass
class Plan:
    """What the rehearsal runs and what it must look at afterwards."""

    tag: str
    line: str
    job: Optional[Job] = None
    logs: list[Log] = field(default_factory=list)
    not_rehearsed: list[tuple[str, str]] = field(default_factory=list)  # (command, why)
    uses_tty: bool = False

    @property
    def folder(self) -> str:
        """The sentinel's private folder at the job's place."""
        return f"/tmp/dfdoctor-rh-{self.tag}"

    @property
    def sentinel(self) -> str:
        """The sentinel's path there."""
        return f"{self.folder}/sentinel.py"

    @property
    def suffix(self) -> str:
        """What every redirected file gets appended."""
        return f".dfdoctor-rh-{self.tag}"


def ssh_extra() -> list[str]:
    """The options every rehearsed ssh gets first (ssh takes the first value given for an option)."""
    extra = []
    cfg = os.environ.get(SSH_CONFIG_ENV)
    if cfg:
        extra += ["-F", cfg]
    return extra + ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "ControlMaster=no",
                    "-o", "ServerAliveInterval=3", "-o", "ServerAliveCountMax=2"]


class _Rewriter:
    """One pass over the line. `chosen` is the index of the Python command the sentinel replaces (the last)."""

    def __init__(self, plan: Plan, chosen: Optional[int], launcher: Optional[str], launcher_text: Optional[str]):
        self.plan = plan
        self.chosen = chosen
        self.jobs_seen = 0
        self.launcher = launcher
        self.launcher_text = launcher_text
        self.launcher_job: Optional[Job] = None

    # -- a shell parses text ------------------------------------------------------------------------------
    def text(self, text: str, chain: tuple[Hop, ...], where: str, cwd: Optional[str] = None) -> str:
        """Rewrite shell text parsed at one hop; return the new text."""
        try:
            pipelines = parse(text)
        except ShellSyntaxError as exc:
            raise CannotRehearse(f"the shell on {where} cannot parse this line: {exc}") from None
        edits: list[tuple[int, int, str]] = []
        state = {"cwd": cwd, "setup": []}
        for p in pipelines:
            for c in p.commands:
                self.command(c, chain, where, state, edits)
        for start, end, new in sorted(edits, key=lambda e: -e[0]):
            text = text[:start] + new + text[end:]
        return text

    def command(self, c: Command, chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """One simple command: its redirects, then its words."""
        for r in c.redirects:
            if r.to_file and r.start >= 0:
                self.plan.logs.append(Log(r.target, r.target + self.plan.suffix, chain, where, state["cwd"],
                                          r.target_dynamic))
                edits.append((r.end, r.end, self.plan.suffix))
        if c.words:
            self.words(c.words, chain, where, state, edits, c.text())
        elif c.assignments:
            state["setup"].append(" ".join(c.assignments))

    def words(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list,
              shown: str) -> None:
        """Words a program receives (exec'd, or after a shell's parsing): find what they run."""
        k = _past_wrappers([w.value for w in words])
        if k >= len(words):
            return
        argv = [w.value for w in words[k:]]
        name = base(argv[0])
        if name == "cd":
            d = argv[1] if len(argv) > 1 else None
            if d and d.startswith("/"):
                state["cwd"] = d
            elif d and state["cwd"]:
                state["cwd"] = posixpath.normpath(posixpath.join(state["cwd"], d))
            else:
                state["cwd"] = d
            return
        if name in ("source", ".", "export") and k == 0 and len(argv) > 1:
            state.setdefault("setup", []).append(" ".join([".", *(w.raw for w in words[1:])]) if name != "export"
                                                 else " ".join(w.raw for w in words))
        kind = hop_kind(argv)
        if kind is not None and kind.hop_takes_one_string:
            self.ssh(words[k:], chain, where, edits)
            return
        if kind is not None:
            self.container(words[k:], chain, where, edits)
            return
        if name == "pct":  # not `pct exec`: enters no container; left as it is, as it always was
            return
        if name in SHELLS and len(argv) > 2 and argv[1].startswith("-") and "c" in argv[1]:
            self.nested(words[k + 2], chain, where, edits, state["cwd"])
            return
        if name == "tmux" and argv[1:2] and argv[1] in ("new", "new-session"):
            self.plan.uses_tty = True
            self.tmux(words[k:], chain, where, state, edits)
            return
        if name == "screen":
            self.screen(words[k:], chain, where, state, edits)
            return
        if self._is_launcher(argv):
            self.launcher_words(words, k, chain, where, state, edits)
            return
        if name.startswith(PYTHONS) or name in RUNNERS:
            self.job(words, k, chain, where, state, edits, shown)
            return
        if name in KEPT or (name == "sleep" and _short_sleep(argv)):
            return
        edits.append((words[0].start, words[-1].end, ":"))
        self.plan.not_rehearsed.append((shown, _why_not(name)))

    # -- hops ---------------------------------------------------------------------------------------------
    def nested(self, word: Word, chain: tuple[Hop, ...], where: str, edits: list, cwd: Optional[str]) -> None:
        """A word that another shell parses at the same place (`sh -c WORD`, tmux's one-word command)."""
        new = self.text(word.value, chain, where, cwd)
        _put_back(word, new, edits)

    def ssh(self, words: list[Word], chain: tuple[Hop, ...], where: str, edits: list) -> None:
        """`ssh [opts] dest CMD...`: options first, then the remote command in the login shell there."""
        argv = [w.value for w in words]
        i, opts = 1, []
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
            if argv[i] == "--":
                i += 1
                break
            a = argv[i]
            takes = False
            for j, ch in enumerate(a[1:], 1):
                if ch in SSH_OPTS_WITH_ARG:
                    takes = j == len(a) - 1  # `-p 22` takes the next word; `-p22` holds its value
                    break
                if ch == "t":
                    self.plan.uses_tty = True
            opts.append(a)
            if takes and i + 1 < len(argv):
                opts.append(argv[i + 1])
                i += 1
            i += 1
        if i >= len(argv) or len(argv) == i + 1:
            raise CannotRehearse("an ssh without a remote command opens an interactive login: nothing to rehearse")
        dest = argv[i]
        host = dest.rpartition("@")[2]
        session_opts = [o for o in opts if not (o.startswith("-") and set(o[1:]) <= {"t", "T"})]
        hop = Hop(hop_kind(argv).scheme, ("ssh", *ssh_extra(), "-T", *session_opts, dest), host)
        edits.append((words[0].end, words[0].end, " " + join(ssh_extra())))
        remote = words[i + 1:]
        new = self.text(" ".join(w.value for w in remote), (*chain, hop), host)
        if len(remote) == 1:
            _put_back(remote[0], new, edits)
        elif new != " ".join(w.value for w in remote):
            if any(w.dynamic for w in remote):
                raise CannotRehearse("ssh's remote command is several words with `$` in them: dfdoctor cannot "
                                     "rewrite it without changing where they expand")
            edits.append((remote[0].start, remote[-1].end, quote(new)))

    def container(self, words: list[Word], chain: tuple[Hop, ...], where: str, edits: list) -> None:
        """`pct exec N --`, `lxc-attach -n N --`, `docker exec C`: the words are exec'd there, no shell."""
        argv = [w.value for w in words]
        name, first = _container_split(argv)
        if name is None or first >= len(argv):
            return
        kind = hop_kind(argv)
        inside = f"container {name}" + (f" on {where}" if chain else "")
        self.words(words[first:], (*chain, Hop(kind.scheme, tuple(kind.session_hop(argv[:first])), inside)), inside,
                   {"cwd": None, "setup": []}, edits, " ".join(argv[first:]))

    def tmux(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """`tmux new -d [-s S] CMD`: one word is run by the default shell; several are exec'd."""
        argv = [w.value for w in words]
        i = 2
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i][-1] in "scnxyeEFtf" and argv[i] not in ("-d", "-P", "-A", "-D", "-X"):
                i += 1
            i += 1
        rest = words[i:]
        if len(rest) == 1:
            self.nested(rest[0], chain, f"tmux pane on {where}", edits, state["cwd"])
        elif rest:
            self.words(rest, chain, f"tmux pane on {where}", dict(state), edits, join(argv[i:]))

    def screen(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """`screen -dmS S CMD...`: the words are exec'd in a window."""
        argv = [w.value for w in words]
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i].endswith("S") or argv[i] in ("-c", "-Logfile", "-t"):
                i += 1
            i += 1
        if words[i:]:
            self.words(words[i:], chain, f"screen window on {where}", dict(state), edits, join(argv[i:]))

    # -- the job ------------------------------------------------------------------------------------------
    def job(self, words: list[Word], k: int, chain: tuple[Hop, ...], where: str, state: dict, edits: list,
            shown: str) -> None:
        """The Python (or torchrun, accelerate, deepspeed) command: the sentinel takes the script's place."""
        index = self.jobs_seen
        self.jobs_seen += 1
        argv = [w.value for w in words[k:]]
        if self.chosen is not None and index != self.chosen:
            edits.append((words[0].start, words[-1].end, ":"))
            self.plan.not_rehearsed.append((shown, "your program (a Python command before the job)"))
            return
        if self.chosen is None:
            return
        runner = base(argv[0])
        script_at = _script_index(argv)
        if runner in RUNNERS:
            # torchrun and friends are the training program too: the sentinel stands in for the whole launcher
            end = words[k + script_at] if script_at is not None else words[-1]
            edits.append((words[k].start, end.end, f"python3 {self.plan.sentinel}"))
            self.plan.not_rehearsed.append((join(argv[:(script_at or 0) + 1]),
                                            f"{runner} itself (its ranks and rendezvous) is not started; "
                                            "python3 runs the sentinel in its place"))
            interpreter = "python3"
        else:
            interpreter = argv[0]
            if script_at is None:
                edits.append((words[k].end, words[k].end, f" {self.plan.sentinel}"))
            else:
                first = words[k + script_at - (1 if argv[script_at - 1] in ("-m", "-c") else 0)]
                edits.append((first.start, words[k + script_at].end, self.plan.sentinel))
        script = argv[script_at] if script_at is not None else None
        is_file = script is not None and argv[script_at - 1] not in ("-m", "-c")
        self.plan.job = Job(argv, interpreter, chain, where, state["cwd"], script,
                            runner if runner in RUNNERS else "python", list(state.get("setup", [])), is_file,
                            self.launcher_job)

    def _is_launcher(self, argv: list[str]) -> bool:
        """Whether these words run the --launcher script (`bash launch.sh`, `./launch.sh`)."""
        if self.launcher_text is None or not self.launcher:
            return False
        words = argv[1:2] if base(argv[0]) in SHELLS else argv[:1]
        return bool(words) and base(words[0]) == base(self.launcher)

    def launcher_words(self, words: list[Word], k: int, chain: tuple[Hop, ...], where: str, state: dict,
                       edits: list) -> None:
        """The launcher runs as `SHELL -c REWRITTEN_TEXT PATH ARGS...`: the same shell, the same `$0` (so
        `cd "$(dirname "$0")"` goes where it would), the same arguments, the rewritten text."""
        argv = [w.value for w in words[k:]]
        at = k + (1 if base(argv[0]) in SHELLS else 0)
        text = self.launcher_text or ""
        self.launcher_text = None  # followed once
        self.launcher_job = Job(argv, argv[0], chain, where, state["cwd"], argv[at - k], "launcher",
                                list(state.get("setup", [])), True)
        new = self.text(text, chain, where, state["cwd"])
        shell = base(argv[0]) if base(argv[0]) in SHELLS else _shebang(text)
        edits.append((words[k].start, words[at].end, f"{shell} -c {quote(new)} {words[at].raw}"))


def _shebang(text: str) -> str:
    """The shell a script's first line names (`#!/usr/bin/env bash`, `#!/bin/sh`), else sh."""
    first = text.splitlines()[0] if text.startswith("#!") else ""
    words = first[2:].split()
    name = base(words[-1]) if words else "sh"
    return name if name in SHELLS else "sh"


def plan(line: str, tag: str, *, launcher: Optional[str] = None, launcher_text: Optional[str] = None) -> Plan:
    """The rehearsal line for `line`; CannotRehearse says why there is none."""
    probe = Plan(tag, line)
    first = _Rewriter(probe, None, launcher, launcher_text)
    first.text(line, (), "your machine")
    if first.jobs_seen == 0 and launcher_text is None:
        raise CannotRehearse("the line starts no Python program (python, torchrun, accelerate, deepspeed) for the "
                             "sentinel to stand in for")
    chosen = max(first.jobs_seen - 1, 0)
    out = Plan(tag, line)
    second = _Rewriter(out, chosen, launcher, launcher_text)
    out.line = second.text(line, (), "your machine")
    if out.job is None:
        raise CannotRehearse("no Python command found to stand the sentinel in for")
    return out


# -- helpers ------------------------------------------------------------------------------------------------
def _put_back(word: Word, new: str, edits: list) -> None:
    """Replace a word's value by `new`, keeping how it was quoted where that maps the value one to one."""
    if new == word.value:
        return
    raw = word.raw
    if raw == word.value and not word.quoted:
        edits.append((word.start, word.end, quote(new)))
    elif raw[:1] == raw[-1:] == "'" and raw[1:-1] == word.value:
        edits.append((word.start, word.end, "'" + new + "'" if "'" not in new else quote(new)))
    elif raw[:1] == raw[-1:] == '"' and raw[1:-1] == word.value and _same_specials(word.value, new):
        edits.append((word.start, word.end, '"' + new + '"'))  # the edits added no `"`, `$`, `` ` `` or `\`
    elif not word.dynamic:
        edits.append((word.start, word.end, quote(new)))
    else:
        raise CannotRehearse(f"the word {raw[:60]} mixes quotes and `$`: dfdoctor cannot rewrite it without "
                             "changing where it expands")


def _same_specials(old: str, new: str) -> bool:
    """Whether `new` holds exactly as many of the characters double quotes treat specially as `old`."""
    return all(old.count(ch) == new.count(ch) for ch in '"$`\\')


def _past_wrappers(argv: list[str]) -> int:
    """Index of the first word that is not a wrapper (nohup, setsid -f, env A=B, nice -n 5, ...) or its option."""
    i = 0
    while i < len(argv) and base(argv[i]) in WRAPPERS:
        w = base(argv[i])
        i += 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            takes = (w == "nice" and argv[i] == "-n") or (w in ("ionice",) and argv[i] in ("-c", "-n")) \
                or (w == "taskset" and argv[i] == "-c") or (w == "timeout" and argv[i] in ("-s", "-k"))
            i += 2 if takes else 1
        if i < len(argv) and argv[i] == "--":
            i += 1
        if w == "env":
            while i < len(argv) and "=" in argv[i]:
                i += 1
        if w in ("timeout", "taskset", "chrt") and i < len(argv):
            i += 1
    return i


def _script_index(argv: list[str]) -> Optional[int]:
    """Where the script (or `-m module` / `-c code`'s value) is in a Python or runner command."""
    name = base(argv[0])
    if name in RUNNERS:
        return next((i for i, a in enumerate(argv) if a.endswith(".py")), None)
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-m", "-c"):
            return i + 1 if i + 1 < len(argv) else None
        if a in ("-X", "-W", "-Q"):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return i
    return None


def _container_split(argv: list[str]) -> tuple[Optional[str], int]:
    """The container's name and the index of the first word it execs (the hop's kind reads it, as for
    launchpath)."""
    kind = hop_kind(argv)
    return kind.hop_split(argv) if kind is not None else (None, len(argv))


def _short_sleep(argv: list[str]) -> bool:
    """A `sleep` short enough to keep inside the rehearsal's bound (the fix's own `sleep 1`)."""
    try:
        return float(argv[1]) <= 2 if len(argv) > 1 else True
    except ValueError:
        return False


def _why_not(name: str) -> str:
    """Why a command of the line is not run by the rehearsal, in words."""
    if name in ("mkdir", "touch", "rm", "cp", "mv", "ln", "chmod", "chown"):
        return "it changes your files; the rehearsal assumes it succeeds"
    if name in ("git", "pip", "pip3", "conda", "uv", "wget", "curl", "apt", "apt-get", "make"):
        return "it fetches, installs or builds; the rehearsal assumes it succeeds"
    return "not plumbing of the launch (only hops, detachers, cd/export/source and redirects run); " \
           "the rehearsal assumes it succeeds"


def session_argv(chain: tuple[Hop, ...], argv: list[str]) -> list[str]:
    """The local argv that runs `argv` at the place `chain` reaches (dfdoctor's own sessions: no tty)."""
    cur = list(argv)
    for hop in reversed(chain):
        cur = [*hop.argv, join(cur)] if kind_for(hop.kind).hop_takes_one_string else [*hop.argv, *cur]
    return cur


def typed_line(chain: tuple[Hop, ...], script: str) -> str:
    """The line a person types to run a shell script at the place `chain` reaches (no rehearsal options)."""
    line = script
    for hop in reversed(chain):
        kind = kind_for(hop.kind)
        if not kind.hop_takes_one_string:
            line = f"{join(kind.typed_hop(hop.argv))} sh -c {quote(line)}"
        else:
            user = _without_extra(list(hop.argv[1:]))
            line = f"{join(['ssh', *user])} {quote(line)}"
    return line


def _without_extra(argv: list[str]) -> list[str]:
    """ssh's words without the options the rehearsal added (and its `-T`), but for the config file dfdoctor's ssh
    used (`-F $DFDOCTOR_SSH_CONFIG`): without it the printed line would not reach where the rehearsal did."""
    ours = ssh_extra()
    out, i = list(ours[:2]) if ours[:1] == ["-F"] else [], 0
    while i < len(argv):
        if argv[i:i + len(ours)] == ours:
            i += len(ours)
            continue
        if argv[i] == "-T":
            i += 1
            continue
        out.append(argv[i])
        i += 1
    return out
