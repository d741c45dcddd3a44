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

from dfdoctor.launchline.hops import PYTHONS, SSH_OPTS_WITH_ARG, base
from dfdoctor.launchline.wrappers import SHELLS, read_shell, read_through
from dfdoctor.rehearse import prove, sshlocal, wall
from dfdoctor.shell import Command, Redirect, ShellSyntaxError, Word, join, parse, quote
from dfdoctor.targets.registry import hop_kind, kind_for
from dfdoctor.lazy_re import compile_later

SSH_CONFIG_ENV = "DFDOCTOR_SSH_CONFIG"
CONNECT_TIMEOUT_S = 5
# Plumbing that runs (REHEARSAL.md), once its words are proved harmless (prove.py): builtins that change only the
# shell's own state or print, and detachers. Not here, so never run: `trap` (its action runs later), `source`/`.`
# (a file's lines), `eval`, `alias`, `read` (waits for input).
RUNS = {"cd", "pushd", "popd", "export", "set", "unset", "umask", "ulimit", "true", "false", ":", "echo",
        "printf", "test", "[", "wait", "disown", "shopt", "exit", "return", "local", "declare", "readonly",
        "typeset"}
# What, when not run, may change what the job finds (its folder, its environment, its files): a rehearsal that
# skipped one of these cannot observe a failure of the line, only warn about it (judge.py).
STATEFUL = {"cd", "pushd", "popd", "export", "set", "source", ".", "eval", "alias", "declare", "typeset",
            "readonly", "local", "mkdir", "ln", "cp", "mv", "touch", "install", "rsync", "tar", "unzip", "conda",
            "module", "ml", "hash", "unset"}
RUNNERS = ("torchrun", "accelerate", "deepspeed")
STANDS_IN = "the sentinel stands in for"  # a not-rehearsed entry that is the rehearsal itself, not a part left out
LAUNCHER_SUFFIXES = (".sh", ".bash")
_JOB_WORD = compile_later(r"(^|[\s/'\"(])(python[\d.]*|pypy\d*|torchrun|accelerate|deepspeed)(\s|$)")
# a redirect's target a hop may expand before the rehearsal: literal text and plain variables, nothing that runs
_PLAIN_DYNAMIC = compile_later(r'(?:[A-Za-z0-9_./@%+,:=~"-]|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})+')
_VAR = compile_later(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
# nohup writes nohup.out in the folder it starts in (else in $HOME) when its stdout is a terminal: the rehearsal
# points that output at a renamed file first, as nohup would have, so the user's nohup.out is never appended to.
NOHUP_OUT = ('if [ -t 1 ]; then {{ exec >>nohup.out{sfx}; }} 2>/dev/null || exec >>"$HOME/nohup.out{sfx}"; fi; '
             'exec "$@"')


# a redirect's target that is the shell's own (bash opens /dev/fd/N, /dev/stdout, /dev/tcp/... itself) or a device
# on every machine; any other path under /dev is asked at its hop whether it is a device there
_SHELLS_OWN = compile_later(r"/dev/(null|zero|full|tty|stdin|stdout|stderr|fd/\d+|(tcp|udp)/.+)")


class Device(str):
    """A redirect's target that a hop found to be a device, a pipe or a socket (runner.EXPAND)."""


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
    dynamic: bool = False  # its path was not known before the rehearsal (left to the look at the job's fds)
    what: str = "redirect"  # redirect | tee | nohup.out | screen log | lock file | time -o
    in_home: bool = False  # relative to $HOME at that place (nohup's fallback), not to `cwd`
    in_launcher: bool = False  # written by a line of the launcher script, not by the line that started it
    value: Optional[str] = None  # a path with variables as its hop expanded it (`"$PWD/x.log"`: /w/sub/x.log)
    op: str = ">"  # the redirect as typed before its path (`>>`, `2>`, `&>`), for a report that quotes it

    @property
    def path(self) -> str:
        """The file's path with no shell text in it: as expanded at its hop, else as typed (a fix names this one,
        never `"$PWD/…"` text, S10)."""
        return self.value or self.typed

    @property
    def absolute(self) -> Optional[str]:
        """The path the shell opened, where its folder is known (None otherwise)."""
        if self.path.startswith("/"):
            return self.path
        return posixpath.normpath(posixpath.join(self.cwd, self.path)) if self.cwd and self.cwd.startswith("/") \
            else None


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
    # what was not run and may change what the job finds (a `cd`, a `source`, a `mkdir`): why, in words; a
    # failure seen without it is not an observed failure of the line (judge.py)
    uncertain: list[str] = field(default_factory=list)
    # what the reader found hiding code (a command it did not run for it): with no wall to hold what the reading
    # may miss, such a line is not rehearsed at all (runner.py)
    hides: list[str] = field(default_factory=list)
    # a program outside the wrapper table that runs the job (`mpirun -np 1`, `xvfb-run -a`, `strace -o F`): not
    # run, so the line is never passed; only what the shell does before any command (its redirects) is observed
    wrapped: list[str] = field(default_factory=list)
    strict: bool = False  # its walls run nothing where they cannot stand (the line hides code: wall.sh's `strict`)
    multiplexers: list[tuple[tuple, str]] = field(default_factory=list)  # (chain, "tmux" | "screen") started
    # the line as run: `line` with each ssh hop's remote command inside the second wall (wall.py); `line` is the
    # one shown. "" where no hop could take one.
    walled_line: str = ""
    walls: list[tuple] = field(default_factory=list)  # the ssh places whose remote command got a wall

    @property
    def mark(self) -> str:
        """The word every name the rehearsal makes carries (its folder, renamed files, tmux socket, screen)."""
        return f"dfdoctor-rh-{self.tag}"

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
                    "-o", "ServerAliveInterval=3", "-o", "ServerAliveCountMax=2", *sshlocal.OFF]


class _Rewriter:
    """One pass over the line. `chosen` is the index of the Python command the sentinel replaces (the last).
    `expanded` holds what each dynamic redirect target expanded to at its hop (the first pass collects them in
    `dynamic`, the runner expands them there, the second pass writes the values in)."""

    def __init__(self, plan: Plan, chosen: Optional[int], launcher: Optional[str], launcher_text: Optional[str],
                 expanded: Optional[dict] = None, walls: bool = False):
        self.plan = plan
        self.walls = walls
        self.chosen = chosen
        self.jobs_seen = 0
        self.launcher = launcher
        self.launcher_text = launcher_text
        self.launcher_job: Optional[Job] = None
        self.expanded = expanded
        self.dynamic: list[tuple[tuple[Hop, ...], str]] = []  # (chain, the text to expand there)

    # -- a shell parses text ------------------------------------------------------------------------------
    def text(self, text: str, chain: tuple[Hop, ...], where: str, cwd: Optional[str] = None,
             tty: bool = True) -> str:
        """Rewrite shell text parsed at one hop (`tty`: its stdout may be a terminal); return the new text."""
        try:
            pipelines = parse(text)
        except ShellSyntaxError as exc:
            raise CannotRehearse(f"the shell on {where} cannot parse this line: {exc}") from None
        edits: list[tuple[int, int, str]] = []
        state = {"cwd": cwd, "setup": [], "vars": {}, "tty": tty}
        for p in pipelines:
            for c in p.commands:
                self.command(c, chain, where, state, edits)
        for start, end, new in sorted(edits, key=lambda e: -e[0]):
            text = text[:start] + new + text[end:]
        return text

    def skip(self, c: Command, edits: list, why: str, *, stateful: bool = False) -> None:
        """Do not run this command: `:` takes its place (words, assignments and redirects), and the report says
        what was not run and why."""
        start, end = c.span()
        # a here-document's body follows the line: it stays a here-document (its delimiter quoted, so nothing in
        # it expands), else its lines would be read as commands
        docs = "".join(f" {r.op}{quote_delimiter(r.target)}" for r in c.redirects if r.op in ("<<", "<<-"))
        edits.append((start, end, ":" + docs))
        self.plan.not_rehearsed.append((_short(c.text()), why))
        if stateful:
            self.plan.uncertain.append(f"`{_short(c.text())}` was not run ({why})")

    def command(self, c: Command, chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """One simple command: what it sits in, whether its words are proved harmless, its redirects, its words."""
        if c.header:  # a `for` loop's list: expanded when the loop starts
            why = prove.unproved(c)
            if why:
                raise CannotRehearse(f"a `for` loop's list: {why}")
            return
        loop = next((n for n in c.nest if n in ("while", "until")), None)
        if loop:
            raise CannotRehearse(f"the line has a `{loop}` loop, whose body dfdoctor does not expand: a rehearsal "
                                 "runs only what it has proved harmless")
        inside = next((n for n in c.nest if n in ("for", "function")), None)
        if inside:
            what = "a `for` loop" if inside == "for" else "a function"
            if _JOB_WORD.search(c.text()):
                raise CannotRehearse(f"the job starts inside {what} ({_short(c.text())}), which dfdoctor does not "
                                     "expand: a rehearsal runs only what it has proved harmless")
            self.skip(c, edits, f"inside {what}, which dfdoctor does not expand", stateful=True)
            return
        why = prove.unproved(c)
        if why:
            argv = [w.value for w in c.words]
            first = argv[read_through(argv).index:][:1]
            if not (first and (base(first[0]).startswith(PYTHONS) or base(first[0]) in RUNNERS)):
                if _JOB_WORD.search(c.text()):  # a hop, a shell or tmux that carries the job
                    raise CannotRehearse(f"{why}, in `{_short(c.text())}`")
                self.skip(c, edits, why, stateful=not c.words or base(first[0] if first else "") in STATEFUL)
                self.plan.hides.append(why)
                return
            if any(r.target_substitution or r.body_expands for r in c.redirects):
                raise CannotRehearse(f"{why}, in `{_short(c.text())}`")
        for w in c.assignment_words:  # `A=$(cmd) python t.py`: the job keeps the name, never the command
            if not prove.harmless_word(w):
                name, _, value = w.raw.partition("=")
                edits.append((w.start, w.end, f"{name}={quote(value)}"))
                self.plan.not_rehearsed.append((w.raw, "a command substitution, which the shell would run"))
        for r in c.redirects:
            self.redirect(r, chain, where, state, edits)
        tty = state["tty"] and not any(1 in r.fds for r in c.redirects)
        if c.words:
            self.words(c.words, chain, where, state, edits, c.text(), tty)
        elif c.assignments:
            state["setup"].append(" ".join(c.assignments))
            for w in c.assignment_words:
                name, _, value = w.value.partition("=")
                state["vars"][name] = None if w.dynamic else value

    def redirect(self, r: Redirect, chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """A file the command writes: renamed with the rehearsal's suffix; a dynamic path expanded at its hop."""
        if not (r.to_file and r.start >= 0):
            return
        if _SHELLS_OWN.fullmatch(r.target) and not r.target_dynamic:
            return  # one of the shell's own descriptors, or a device everywhere: no file to rename
        if r.target.startswith("/proc/") and not r.target_dynamic:
            # another process's output (`> /proc/1/fd/1`: the container's main process, so `docker logs`): the
            # sentinel's words never go there; what it would have reached is said, not observed
            edits.append((r.end - len(r.target_raw), r.end, "/dev/null"))
            self.plan.not_rehearsed.append((r.raw, "it writes into another process's output (for /proc/1/fd/1: "
                                            "the container's log); the rehearsal wrote to /dev/null instead"))
            return
        if not r.target_dynamic and not r.target.startswith("/dev/"):
            self.plan.logs.append(Log(r.target, r.target + self.plan.suffix, chain, where, state["cwd"],
                                      op=_typed_op(r)))
            edits.append((r.end, r.end, self.plan.suffix))
            return
        # a path the hop must be asked about: what a variable holds there, and whether a path under /dev is a
        # device there (/dev/shm/train.log is a user's file: S1), judged by the hop itself (runner.EXPAND)
        raw = r.target_raw if r.target_dynamic else quote(r.target)
        if not _PLAIN_DYNAMIC.fullmatch(raw):
            raise CannotRehearse(f"the log's path {raw} holds more than plain variables: dfdoctor cannot know "
                                 "which file it names without running it")
        known = state["vars"]
        for name in _VAR.findall(raw):
            if name in known and known[name] is None:
                raise CannotRehearse(f"the log's path {raw} uses ${name}, which the line sets to a value dfdoctor "
                                     "cannot know without running it")
        text = _VAR.sub(lambda m: known[m.group(1)] if m.group(1) in known else m.group(0), raw)
        if self.expanded is None:  # the first pass: collect it, for the runner to expand at that hop
            self.dynamic.append((chain, text))
            self.plan.logs.append(Log(raw, raw + self.plan.suffix, chain, where, state["cwd"], dynamic=True,
                                      op=_typed_op(r)))
            edits.append((r.end, r.end, self.plan.suffix))
            return
        value = self.expanded.get((chain, text))
        if not value:
            raise CannotRehearse(f"the log's path {raw} could not be expanded on {where}")
        if isinstance(value, Device):
            if r.target_dynamic:  # the device it names there, as the shell would have opened it
                edits.append((r.end - len(r.target_raw), r.end, quote(value)))
            return
        self.plan.logs.append(Log(raw, value + self.plan.suffix, chain, where, state["cwd"], value=value,
                                  op=_typed_op(r)))
        edits.append((r.end - len(r.target_raw), r.end, quote(value + self.plan.suffix)))

    def output_word(self, word: Word, chain: tuple[Hop, ...], where: str, state: dict, edits: list,
                    what: str) -> None:
        """A word naming a file a command writes (tee's, screen's -Logfile, flock's): renamed like a redirect's."""
        if word.dynamic:
            raise CannotRehearse(f"{what} {word.raw} is a path with `$` in it: dfdoctor expands only a redirect's")
        self.plan.logs.append(Log(word.value, word.value + self.plan.suffix, chain, where, state["cwd"],
                                  what=what))
        edits.append((word.start, word.end, quote(word.value + self.plan.suffix)))

    def words(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list,
              shown: str, tty: bool = True) -> None:
        """Words a program receives (exec'd, or after a shell's parsing): find what they run. `tty`: their stdout
        may be a terminal (nohup then writes nohup.out)."""
        argv = [w.value for w in words]
        through = read_through(argv)
        k = through.index
        if through.unknown:
            if _JOB_WORD.search(" ".join(argv)):
                raise CannotRehearse(f"{through.unknown}: dfdoctor cannot tell what it runs")
            self.skip_words(words, edits, shown, through.unknown)
            return
        if k >= len(words):
            return
        for at in through.outputs:  # `flock FILE`, `time -o FILE`: files the wrappers create
            self.output_word(words[at], chain, where, state, edits, "the file")
        for wname, _, at in through.wrappers:
            if wname == "sudo":  # never a password prompt: the rehearsal waits for no input
                edits.append((words[at].end, words[at].end, " -n"))
        argv = argv[k:]
        name = base(argv[0])
        if name in ("cd", "pushd") and k == 0:
            d = argv[1] if len(argv) > 1 else None
            if d and d.startswith("/"):
                state["cwd"] = d
            elif d and state["cwd"]:
                state["cwd"] = posixpath.normpath(posixpath.join(state["cwd"], d))
            else:
                state["cwd"] = d
            state["vars"]["PWD"] = _pwd_after_cd(state["cwd"], d, len(words) > 1 and words[1].dynamic)
            return
        if name == "export" and k == 0 and len(argv) > 1:
            state["setup"].append(" ".join(w.raw for w in words))
            for w in words[1:]:
                if "=" in w.value:
                    var, _, value = w.value.partition("=")
                    state["vars"][var] = None if w.dynamic else value
        if name in ("source", ".") and k == 0:
            self.source(words, chain, where, state, edits, shown)
            return
        kind = hop_kind(argv)
        if kind is not None and kind.hop_takes_one_string:
            self.ssh(words[k:], chain, where, edits)
            return
        if kind is not None:
            self.container(words[k:], chain, where, edits, tty)
            return
        if name == "pct":  # not `pct exec`: enters no container; not run
            self.skip_words(words, edits, shown, "a `pct` command that enters no container")
            return
        if name in SHELLS:
            call = read_shell(argv)
            if call.unknown:
                raise CannotRehearse(call.unknown)
            if call.command_string and call.script_at is not None:
                self.nested(words[k + call.script_at], chain, where, edits, state["cwd"], tty)
                return
        if name == "tmux" and argv[1:2] and argv[1] in ("new", "new-session"):
            self.plan.uses_tty = True
            self.tmux(words[k:], chain, where, state, edits)
            return
        if name == "screen":
            self.screen(words[k:], chain, where, state, edits)
            return
        if name == "tee":
            self.tee(words[k:], chain, where, state, edits, shown)
            return
        if self._is_launcher(argv):
            self.launcher_words(words, k, chain, where, {**state, "tty": tty}, edits)
            return
        if name.startswith(PYTHONS) or name in RUNNERS:
            for wname, ws, at in through.wrappers:
                if wname == "srun":  # the program would run on a node; here it runs where srun was typed
                    self.plan.not_rehearsed.append((join(ws), f"{through.elsewhere}; the rehearsal runs the "
                                                    "program where srun was typed, without srun"))
                    edits.append((words[at].start, words[at + len(ws) - 1].end, "env"))
                if wname == "nohup" and tty:
                    self.nohup_out(words[at], chain, where, state, edits)
            if through.cwd:
                state = {**state, "cwd": through.cwd if through.cwd.startswith("/") or not state["cwd"]
                         else posixpath.join(state["cwd"], through.cwd)}
            self.job(words, k, chain, where, state, edits, shown)
            return
        if name in RUNS or (name == "sleep" and _short_sleep(argv)):
            return
        if self.unknown_wrapper(words, k, chain, where, state, edits, shown):
            return
        self.skip_words(words, edits, shown, _why_not(name), stateful=name in STATEFUL)

    def unknown_wrapper(self, words: list[Word], k: int, chain: tuple[Hop, ...], where: str, state: dict,
                        edits: list, shown: str) -> bool:
        """A program the wrapper table does not know, running the job (`mpirun -np 1 python3 t.py`): it is not
        run (what it does is not known: `strace -o F` writes F), the job runs without it, and the plan says the
        line was not rehearsed; its redirects, opened by the shell before any command, still are."""
        at = next((i for i in range(k + 1, len(words)) if not words[i].dynamic and
                   (base(words[i].value).startswith(PYTHONS) or base(words[i].value) in RUNNERS)), None)
        if at is None:
            return False
        wrapper = join([w.value for w in words[k:at]])
        edits.append((words[k].start, words[at - 1].end, "env"))
        self.plan.not_rehearsed.append((_short(wrapper), f"`{base(words[k].value)}` is no wrapper dfdoctor knows: "
                                        "what it does to the job was not run (the job was rehearsed without it)"))
        self.plan.wrapped.append(f"`{_short(wrapper)}` was not run (dfdoctor does not know what it does)")
        self.job(words, at, chain, where, state, edits, shown)
        return True

    def skip_words(self, words: list[Word], edits: list, shown: str, why: str, *, stateful: bool = False) -> None:
        """Do not run these words: `:` takes their place (their redirects stay, renamed)."""
        edits.append((words[0].start, words[-1].end, ":"))
        self.plan.not_rehearsed.append((shown, why))
        if stateful:
            self.plan.uncertain.append(f"`{_short(shown)}` was not run ({why})")

    def source(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list,
               shown: str) -> None:
        """`source FILE`: a file's lines are not run. A venv's `bin/activate` is stood in for by what it is known
        to do (VIRTUAL_ENV, PATH); anything else is not rehearsed, and what follows may differ."""
        state["setup"].append(" ".join([".", *(w.raw for w in words[1:])]))
        path = words[1].value if len(words) > 1 else ""
        if len(words) == 2 and not words[1].dynamic and path.endswith("/bin/activate"):
            venv = posixpath.dirname(posixpath.dirname(path)) or "."
            if not venv.startswith("/") and state["cwd"] and state["cwd"].startswith("/"):
                venv = posixpath.normpath(posixpath.join(state["cwd"], venv))
            edits.append((words[0].start, words[-1].end,
                          f'export VIRTUAL_ENV={quote(venv)} PATH={quote(venv + "/bin")}:"$PATH"'))
            self.plan.not_rehearsed.append((shown, "a file's lines are not run; what a venv's activate does "
                                            "(VIRTUAL_ENV, PATH) was set in its place"))
            return
        self.skip_words(words, edits, shown, "a sourced file's lines are not run (they may run any command)",
                        stateful=True)

    def tee(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list,
            shown: str) -> None:
        """`tee [-a] FILE...`: runs, writing renamed files."""
        files = []
        for w in words[1:]:
            if w.value in ("-a", "--append", "-i", "--ignore-interrupts", "-p") or w.value.startswith("--output-error"):
                continue
            if w.value.startswith("-"):
                self.skip_words(words, edits, shown, f"tee's option {w.value} is not one dfdoctor knows")
                return
            files.append(w)
        for w in files:
            self.output_word(w, chain, where, state, edits, "tee's file")

    def nohup_out(self, word: Word, chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """`nohup CMD` with its stdout not redirected: where that is a terminal, nohup appends to nohup.out; the
        rehearsal opens a renamed one first (in the same folder, else in $HOME, as nohup would)."""
        guard = NOHUP_OUT.format(sfx=self.plan.suffix)
        edits.append((word.start, word.start, f"sh -c {quote(guard)} sh "))
        self.plan.logs.append(Log("nohup.out", "nohup.out" + self.plan.suffix, chain, where, state["cwd"],
                                  what="nohup.out"))
        self.plan.logs.append(Log("nohup.out", "nohup.out" + self.plan.suffix, chain, where, None,
                                  what="nohup.out", in_home=True))

    # -- hops ---------------------------------------------------------------------------------------------
    def nested(self, word: Word, chain: tuple[Hop, ...], where: str, edits: list, cwd: Optional[str],
               tty: bool = True) -> None:
        """A word that another shell parses at the same place (`sh -c WORD`, tmux's one-word command)."""
        new = self.text(word.value, chain, where, cwd, tty)
        _put_back(word, new, edits)

    def ssh(self, words: list[Word], chain: tuple[Hop, ...], where: str, edits: list) -> None:
        """`ssh [opts] dest CMD...`: options first, then the remote command in the login shell there."""
        argv = [w.value for w in words]
        i, opts, remote_tty, forks = 1, [], False, []
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
            if argv[i] == "--":
                i += 1
                break
            a = argv[i]
            takes = False
            for j, ch in enumerate(a[1:], 1):
                if ch in SSH_OPTS_WITH_ARG:
                    takes = j == len(a) - 1  # `-p 22` takes the next word; `-p22` holds its value
                    if ch == "E" and not takes:  # `-Efile`: ssh's own log, glued
                        a = argv[i] = self.ssh_log(a[j + 1:], a[:j + 1] + "/dev/null", words[i], edits,
                                                   whole=not forks or forks[-1] != i)
                    break
                if ch == "t":
                    self.plan.uses_tty = remote_tty = True
                if ch == "f" and i not in forks:
                    forks.append(i)
            opts.append(a.replace("f", "", 1) if i in forks else a)
            if takes and i + 1 < len(argv):
                if a.endswith("E"):  # `-E FILE`
                    argv[i + 1] = self.ssh_log(argv[i + 1], "/dev/null", words[i + 1], edits)
                opts.append(argv[i + 1])
                i += 1
            i += 1
        if i >= len(argv) or len(argv) == i + 1:
            raise CannotRehearse("an ssh without a remote command opens an interactive login: nothing to rehearse")
        dest = argv[i]
        host = dest.rpartition("@")[2]
        session_opts = [o for o in opts if not (o.startswith("-") and set(o[1:]) <= {"t", "T"})]
        # the ssh client runs no local command of the user's (sshlocal.py): LocalCommand is off, the rest refused
        why = sshlocal.why_not(tuple(session_opts), dest, local=not chain,
                               own_config=os.environ.get(SSH_CONFIG_ENV))
        if why:
            raise CannotRehearse(why)
        if any(key == "localcommand" for key, _ in sshlocal.options(tuple(opts))):
            self.plan.not_rehearsed.append((f"ssh to {host}: LocalCommand", "ssh runs it on the machine it starts "
                                            "on; the rehearsal's ssh ran with PermitLocalCommand=no"))
        if forks:
            # `ssh -f` forks into the background once logged in, in a session of its own, stdin from /dev/null:
            # `setsid -f ssh -n` does that before logging in, so the rehearsal's terminal closing does not end it
            # while it logs in, as a user's terminal left open would not
            edits.append((words[0].start, words[0].start, "setsid -f "))
            for at in forks:
                edits.append((words[at].start, words[at].end, quote(argv[at].replace("f", "n", 1))))
        hop = Hop(hop_kind(argv).scheme, ("ssh", *ssh_extra(), "-T", *session_opts, dest), host)
        edits.append((words[0].end, words[0].end, " " + join(ssh_extra())))
        remote = words[i + 1:]
        # the remote command's stdout is the ssh channel, a terminal only with -t
        new = self.text(" ".join(w.value for w in remote), (*chain, hop), host,
                        tty=remote_tty)
        if self.walls:  # the login shell there runs the wall, which runs the text by that same shell
            walled = f"{wall.prefix(self.plan, (*chain, hop))} -c {quote(new)}"
            try:
                self.put_remote(remote, walled, edits)
                self.plan.walls.append((*chain, hop))
                return
            except CannotRehearse:
                pass  # quoting that cannot carry the wall: that hop runs without it (the evidence says so)
        self.put_remote(remote, new, edits)

    def ssh_log(self, path: str, new: str, word: Word, edits: list, whole: bool = True) -> str:
        """ssh's `-E FILE`: ssh appends its own messages to FILE, a user's file; the rehearsal's ssh writes them
        to /dev/null (`whole`: this edit replaces the word; else the `-f` edit of the same word carries it)."""
        if whole:
            edits.append((word.start, word.end, quote(new)))
        self.plan.not_rehearsed.append((f"ssh -E {path}", "ssh's own log: the rehearsal's ssh wrote it to /dev/null"))
        return new

    def put_remote(self, remote: list[Word], new: str, edits: list) -> None:
        """Put the rewritten remote command back into ssh's words."""
        if len(remote) == 1:
            _put_back(remote[0], new, edits)
        elif new != " ".join(w.value for w in remote):
            if any(w.dynamic for w in remote):
                raise CannotRehearse("ssh's remote command is several words with `$` in them: dfdoctor cannot "
                                     "rewrite it without changing where they expand")
            edits.append((remote[0].start, remote[-1].end, quote(new)))

    def container(self, words: list[Word], chain: tuple[Hop, ...], where: str, edits: list, tty: bool = True) -> None:
        """`pct exec N --`, `lxc-attach -n N --`, `docker exec C`: the words are exec'd there, no shell."""
        argv = [w.value for w in words]
        name, first = _container_split(argv)
        if name is None or first >= len(argv):
            return
        kind = hop_kind(argv)
        inside = f"container {name}" + (f" on {where}" if chain else "")
        there = (*chain, Hop(kind.scheme, tuple(kind.session_hop(argv[:first])), inside))
        self.words(words[first:], there, inside, {"cwd": None, "setup": [], "vars": {}, "tty": tty}, edits,
                   " ".join(argv[first:]), tty)
        if self.walls:  # the words are exec'd by the wall there (an edit at their start, applied last: outermost)
            edits.append((words[first].start, words[first].start, wall.prefix(self.plan, there) + " "))
            self.plan.walls.append(there)

    def tmux(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """`tmux new -d [-s S] CMD`: one word is run by the default shell; several are exec'd. The server is a
        private one (`-L MARK`), killed after: the user's own sessions and names are never touched."""
        argv = [w.value for w in words]
        i, name_at = _tmux_options(argv)
        # the private server reads no configuration file: a user's ~/.tmux.conf may run commands (run-shell)
        private = f"-L {self.plan.mark} -f /dev/null"
        if name_at is not None and not words[name_at[0]].dynamic:
            name = argv[name_at[0]][name_at[1]:]
            # the user's own server is only asked (read-only) whether the name is taken, as `tmux new` would find
            guard = (f'if tmux has-session -t "=$1" 2>/dev/null; then echo "duplicate session: $1" >&2; exit 1; fi; '
                     f'shift; exec tmux {private} "$@"')
            edits.append((words[0].start, words[0].end, f"sh -c {quote(guard)} sh {quote(name)}"))
        else:
            edits.append((words[0].end, words[0].end, " " + private))
        self.plan.multiplexers.append((chain, "tmux"))
        rest = words[i:]
        if len(rest) == 1:
            self.nested(rest[0], chain, f"tmux pane on {where}", edits, state["cwd"])
        elif rest:
            self.words(rest, chain, f"tmux pane on {where}", {**state, "tty": True}, edits, join(argv[i:]))

    def screen(self, words: list[Word], chain: tuple[Hop, ...], where: str, state: dict, edits: list) -> None:
        """`screen -dmS S CMD...`: the words are exec'd in a window. Its sockets go to a private SCREENDIR, its
        session name and its log file (`-L`, `-Logfile F`) are renamed: nothing of the user's is touched."""
        argv = [w.value for w in words]
        edits.append((words[0].start, words[0].start, f"env SCREENDIR=/tmp/{self.plan.mark}.screen "))
        self.plan.multiplexers.append((chain, "screen"))
        i, logfile = 1, False
        while i < len(argv) and argv[i].startswith("-"):
            a = argv[i]
            if a == "-Logfile" and i + 1 < len(argv):
                self.output_word(words[i + 1], chain, where, state, edits, "screen's log")
                logfile = True
                i += 2
                continue
            if a.endswith("S") and i + 1 < len(argv):
                edits.append((words[i + 1].end, words[i + 1].end, self.plan.suffix))
                i += 2
                continue
            if a in ("-c", "-t", "-p", "-h", "-e", "-T", "-X") or a.endswith(("c", "t", "p", "h", "e", "T")) and \
                    not a.startswith("--"):
                i += 2
                continue
            i += 1
        if any(a.startswith("-") and "L" in a[1:] and a != "-Logfile" for a in argv[1:i]) and not logfile:
            # `screen -L` logs to screenlog.0 in the folder it starts in: a renamed file instead
            edits.append((words[0].end, words[0].end, f" -Logfile screenlog.0{self.plan.suffix}"))
            self.plan.logs.append(Log("screenlog.0", "screenlog.0" + self.plan.suffix, chain, where, state["cwd"],
                                      what="screen's log"))
        if words[i:]:
            self.words(words[i:], chain, f"screen window on {where}", {**state, "tty": True}, edits, join(argv[i:]))

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
        for i, w in enumerate(words):
            if prove.harmless_word(w):
                continue
            if script_at is None or i <= k + script_at:
                raise CannotRehearse(f"`{_short(w.raw)}` runs a command when the shell expands it, in `{shown}`")
            edits.append((w.start, w.end, quote(w.raw)))  # the job keeps the argument's place, never its command
            self.plan.not_rehearsed.append((w.raw, "a command substitution in the job's arguments, which the "
                                            "shell would run; the sentinel got the text as typed"))
        if runner in RUNNERS:
            # torchrun and friends are the training program too: the sentinel stands in for the whole launcher
            end = words[k + script_at] if script_at is not None else words[-1]
            edits.append((words[k].start, end.end, f"python3 {self.plan.sentinel}"))
            self.plan.not_rehearsed.append((join(argv[:(script_at or 0) + 1]),
                                            f"{STANDS_IN} {runner} itself (its ranks and rendezvous are "
                                            "not started; python3 runs the sentinel in its place)"))
            interpreter = "python3"
        else:
            interpreter = argv[0]
            if script_at is None:
                edits.append((words[k].end, words[k].end, f" {self.plan.sentinel}"))
            else:
                first = words[k + script_at - (1 if argv[script_at - 1] in ("-m", "-c") else 0)]
                edits.append((first.start, words[k + script_at].end, self.plan.sentinel))
        script = argv[script_at] if script_at is not None else None
        # a script path with `$` in it is what that shell expands, unknown here: not looked for (never guessed)
        is_file = script is not None and argv[script_at - 1] not in ("-m", "-c") and not words[k + script_at].dynamic
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
        first = len(self.plan.logs)
        new = self.text(text, chain, where, state["cwd"], state.get("tty", True))
        for lg in self.plan.logs[first:]:  # the launcher's own redirects (the line's are the launcher's output)
            lg.in_launcher = True
        shell = base(argv[0]) if base(argv[0]) in SHELLS else _shebang(text)
        edits.append((words[k].start, words[at].end, f"{shell} -c {quote(new)} {words[at].raw}"))


# tmux new-session's options that take a value (`-s NAME`, `-sNAME`, `-ds NAME`)
_TMUX_VALUED = "cefFnstxy"


def _tmux_options(argv: list[str]) -> tuple[int, Optional[tuple[int, int]]]:
    """Where `tmux new [OPTIONS] CMD...`'s command starts, and where the session's name (-s) is: the word's index
    and the offset of the name in it (a glued `-sNAME`, a clustered `-dsNAME`), as tmux's getopt reads them."""
    i, name = 2, None
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        if argv[i] == "--":
            return i + 1, name
        word = argv[i]
        for k in range(1, len(word)):
            if word[k] in _TMUX_VALUED:
                at = (i, k + 1) if k + 1 < len(word) else (i + 1, 0)
                if word[k] == "s" and at[0] < len(argv):
                    name = at
                i = at[0]
                break
        i += 1
    return i, name


def _pwd_after_cd(cwd: Optional[str], typed: Optional[str], dynamic: bool) -> Optional[str]:
    """What `$PWD` is after a `cd`, as text a hop expands where the line's session starts (a redirect's
    `"$PWD/logs/x.log"` after `cd sub` names sub/logs, S10); None: unknown (`cd $DIR`, `cd -`)."""
    if dynamic or typed == "-" or quote(cwd or ".") != (cwd or "."):  # (a name that needs quotes: unknown too)
        return None
    if typed is None:
        return "${HOME}"
    return cwd if cwd and cwd.startswith("/") else "${PWD}/" + (cwd or ".")


def _typed_op(r: Redirect) -> str:
    """`>>`, `2>`, `&>`: the redirect as typed before its target."""
    return f"{'' if r.fd is None else r.fd}{r.op}"


def _shebang(text: str) -> str:
    """The shell a script's first line names (`#!/usr/bin/env bash`, `#!/bin/sh`), else sh."""
    first = text.splitlines()[0] if text.startswith("#!") else ""
    words = first[2:].split()
    name = base(words[-1]) if words else "sh"
    return name if name in SHELLS else "sh"


def plan(line: str, tag: str, *, launcher: Optional[str] = None, launcher_text: Optional[str] = None,
         expand=None) -> Plan:
    """The rehearsal line for `line`; CannotRehearse says why there is none. `expand(chain, texts)` expands
    redirect targets with variables at the hop `chain` reaches (a list of values, one per text); without it
    they keep their variables and only the look at the job's descriptors finds them."""
    probe = Plan(tag, line)
    first = _Rewriter(probe, None, launcher, launcher_text)
    first.text(line, (), "your machine")
    if first.jobs_seen == 0 and launcher_text is None:
        raise CannotRehearse("the line starts no Python program (python, torchrun, accelerate, deepspeed) for the "
                             "sentinel to stand in for")
    expanded = None
    if first.dynamic and expand is not None:
        expanded = {}
        by_chain: dict[tuple, list[str]] = {}
        for chain, text in first.dynamic:
            by_chain.setdefault(chain, []).append(text)
        for chain, texts in by_chain.items():
            texts = list(dict.fromkeys(texts))
            values = expand(chain, texts)
            expanded.update({(chain, t): v for t, v in zip(texts, values)})
    chosen = max(first.jobs_seen - 1, 0)
    out = Plan(tag, line)
    second = _Rewriter(out, chosen, launcher, launcher_text, expanded)
    out.line = second.text(line, (), "your machine")
    if out.job is None:
        raise CannotRehearse("no Python command found to stand the sentinel in for")
    walled = Plan(tag, line)  # the same pass again, each ssh hop's remote command inside the second wall
    walled.strict = bool(out.hides)
    try:
        walled.line = _Rewriter(walled, chosen, launcher, launcher_text, expanded, walls=True).text(line, (),
                                                                                                   "your machine")
    except CannotRehearse:
        walled.walls = []
    if walled.walls:
        out.walled_line, out.walls = walled.line, walled.walls
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


def quote_delimiter(delim: str) -> str:
    """A here-document's delimiter, quoted so that its body is not expanded."""
    return "'" + delim + "'" if "'" not in delim else '"' + delim + '"'


def _short(text: str) -> str:
    """A command as typed, shortened for a report."""
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


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
    if name == "trap":
        return "a trap's action runs a command later (on exit or a signal)"
    if name == "eval":
        return "eval runs text as commands"
    return "not plumbing of the launch (only hops, detachers, cd/export and redirects run); " \
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


def user_ssh_words(hop: Hop) -> list[str]:
    """An ssh hop's words as a fix line types them: the user's options and the destination (no `ssh`)."""
    return _without_extra(list(hop.argv[1:]))


def _without_extra(argv: list[str]) -> list[str]:
    """ssh's words without the options the rehearsal added (and its `-T`), but for the config file dfdoctor's ssh
    used (`-F $DFDOCTOR_SSH_CONFIG`): without it the printed line would not reach where the rehearsal did. Where
    the user's hop names its own `-F`, that one is the line's (never `ssh -F X -F X`)."""
    ours = ssh_extra()
    out, i = [], 0
    while i < len(argv):
        if argv[i:i + len(ours)] == ours:
            i += len(ours)
            continue
        if argv[i] == "-T":
            i += 1
            continue
        out.append(argv[i])
        i += 1
    users_config = any(a.startswith("-F") for a in out[:-1])
    return (list(ours[:2]) if ours[:1] == ["-F"] and not users_config else []) + out
