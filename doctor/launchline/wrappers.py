"""Commands that run another command: the one table every reader of a launch line reads through.

A wrapper (`nohup`, `env -u X`, `taskset -c 0`, `flock F`, `srun`, ...) only changes how the next program runs,
so each reader (launchline/commandline.py's job spec, launchline/launchpath.py's hops, rehearse/rewrite.py's
rehearsal) looks past it the way the shell does, to the program it runs. What a wrapper's options mean is
written here once: which take a value, how many operands come before the program (`taskset MASK`, `timeout
DURATION`, `flock FILE`), which options turn it into something that runs no program (`taskset -p`,
`command -v`), and which of its words name a file it creates (`flock FILE`, `time -o FILE`). An option the
table does not know is reported, never guessed past: the reader marks the line as not understood.

Also here: a shell's own options, read by name (`bash --rcfile FILE -lc SCRIPT`), so its `-c` script is found.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Wrapper:
    """How one wrapper reads its words. `flags=None`: any other `-x` is a flag (a wrapper with too many to list)."""

    takes_value: frozenset = frozenset()  # options followed by their value (`-n 5`), or glued (`-n5`, `--x=5`)
    flags: Optional[frozenset] = frozenset()  # options that take no value
    operands: int = 0  # words before the program (taskset's mask, timeout's duration, flock's file, chrt's prio)
    not_a_wrapper: frozenset = frozenset()  # options after which it runs no program (`taskset -p PID`)
    assigns: bool = False  # takes `VAR=value` words before the program (env)
    chdir: frozenset = frozenset()  # options whose value is the folder the program starts in
    output_operand: bool = False  # its operand is a file it opens for writing, creating it (flock FILE)
    output_opts: frozenset = frozenset()  # options whose value is a file it writes (time -o FILE)
    runs_elsewhere: str = ""  # the program runs somewhere else (a Slurm step): why a rehearsal cannot run it
    long_take_value: bool = False  # a `--long` option not listed as a flag takes the next word (srun's many)


def _f(*opts: str) -> frozenset:
    return frozenset(opts)


TABLE: dict[str, Wrapper] = {
    "nohup": Wrapper(),
    "setsid": Wrapper(flags=_f("-f", "--fork", "-w", "--wait", "-c", "--ctty")),
    "exec": Wrapper(takes_value=_f("-a"), flags=_f("-c", "-l")),
    "command": Wrapper(flags=_f("-p"), not_a_wrapper=_f("-v", "-V")),
    "builtin": Wrapper(),
    "time": Wrapper(takes_value=_f("-f", "--format", "-o", "--output"),
                    flags=_f("-p", "-a", "--append", "-v", "--verbose", "-q", "--quiet", "--portability"),
                    output_opts=_f("-o", "--output")),
    "env": Wrapper(takes_value=_f("-u", "--unset", "-C", "--chdir"),
                   flags=_f("-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"),
                   not_a_wrapper=_f("-S", "--split-string"), assigns=True, chdir=_f("-C", "--chdir")),
    "nice": Wrapper(takes_value=_f("-n", "--adjustment")),
    "ionice": Wrapper(takes_value=_f("-c", "--class", "-n", "--classdata"), flags=_f("-t", "--ignore"),
                      not_a_wrapper=_f("-p", "--pid", "-P", "--pgid", "-u", "--uid")),
    "chrt": Wrapper(takes_value=_f("-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"),
                    flags=_f("-a", "--all-tasks", "-b", "--batch", "-d", "--deadline", "-f", "--fifo", "-i",
                             "--idle", "-o", "--other", "-r", "--rr", "-R", "--reset-on-fork", "-v", "--verbose"),
                    operands=1, not_a_wrapper=_f("-p", "--pid", "-m", "--max")),
    "taskset": Wrapper(flags=_f("-c", "--cpu-list", "-a", "--all-tasks"), operands=1,
                       not_a_wrapper=_f("-p", "--pid")),
    "numactl": Wrapper(takes_value=_f("-N", "--cpunodebind", "-m", "--membind", "-C", "--physcpubind", "-i",
                                      "--interleave", "-p", "--preferred", "-P", "--preferred-many", "-w",
                                      "--weighted-interleave"),
                       flags=_f("-l", "--localalloc", "-a", "--all", "-b", "--balancing"),
                       not_a_wrapper=_f("-s", "--show", "-H", "--hardware")),
    "stdbuf": Wrapper(takes_value=_f("-i", "--input", "-o", "--output", "-e", "--error")),
    "flock": Wrapper(takes_value=_f("-w", "--timeout", "-E", "--conflict-exit-code"),
                     flags=_f("-s", "--shared", "-x", "-e", "--exclusive", "-n", "--nb", "--nonblock", "-o",
                              "--close", "-F", "--no-fork", "--verbose"),
                     operands=1, output_operand=True, not_a_wrapper=_f("-u", "--unlock")),
    "sudo": Wrapper(takes_value=_f("-u", "--user", "-g", "--group", "-C", "--close-from", "-h", "--host", "-p",
                                   "--prompt", "-U", "--other-user", "-r", "--role", "-t", "--type", "-T",
                                   "--command-timeout", "-D", "--chdir", "-R", "--chroot"),
                    flags=_f("-E", "--preserve-env", "-H", "--set-home", "-n", "--non-interactive", "-S",
                             "--stdin", "-A", "--askpass", "-P", "--preserve-groups", "-k", "--reset-timestamp"),
                    not_a_wrapper=_f("-l", "--list", "-v", "--validate", "-e", "--edit", "-K",
                                     "--remove-timestamp", "-V", "--version", "-s", "--shell", "-i", "--login",
                                     "-b", "--background"),
                    chdir=_f("-D", "--chdir")),
    "timeout": Wrapper(takes_value=_f("-s", "--signal", "-k", "--kill-after"),
                       flags=_f("--preserve-status", "--foreground", "-v", "--verbose"), operands=1),
    "caffeinate": Wrapper(flags=None),
    "unbuffer": Wrapper(flags=None),
    "srun": Wrapper(takes_value=_f("-A", "-b", "-c", "-C", "-d", "-D", "-e", "-G", "-i", "-J", "-L", "-m", "-n",
                                   "-N", "-o", "-p", "-q", "-r", "-S", "-t", "-T", "-W", "-w", "-x", "-B", "-M"),
                    flags=_f("-l", "--label", "-u", "--unbuffered", "-v", "--verbose", "-Q", "--quiet", "-q",
                             "-X", "--disable-status", "-Z", "--no-allocate", "-H", "--hold", "-O",
                             "--overcommit", "-k", "--no-kill", "-s", "--oversubscribe", "-E", "--preserve-env",
                             "-K", "--kill-on-bad-exit", "-I", "--immediate", "--pty", "--exclusive", "--exact",
                             "--overlap", "--whole", "--multi-prog", "--test-only", "--spread-job", "--contiguous"),
                    chdir=_f("-D", "--chdir"), long_take_value=True,
                    runs_elsewhere="srun starts a Slurm job step on the allocation's nodes"),
}

# A shell's options that take the next word as their value (bash, sh, dash, zsh): read by name, never by letter.
SHELL_OPTS_WITH_VALUE = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}
SHELL_LONG_FLAGS = {"--login", "--noprofile", "--norc", "--posix", "--restricted", "--verbose", "--noediting",
                    "--debugger", "--dump-strings", "--dump-po-strings", "--pretty-print", "--wordexp", "--"}
SHELLS = {"sh", "bash", "dash", "zsh", "ash", "ksh", "busybox"}


@dataclass
class Through:
    """What reading through the wrappers at the start of argv found."""

    index: int  # where the program starts (len(argv): none)
    wrappers: list[tuple[str, list[str], int]] = field(default_factory=list)  # each one's name, words, index
    env: dict[str, str] = field(default_factory=dict)  # `env A=B`
    unset: list[str] = field(default_factory=list)  # `env -u A`
    cwd: Optional[str] = None  # `env -C D`, `sudo -D D`: where the program starts
    outputs: list[int] = field(default_factory=list)  # indexes of words naming a file a wrapper writes
    unknown: str = ""  # a word the table does not know, in words: the reader must not guess past it
    elsewhere: str = ""  # a wrapper runs the program elsewhere (srun): why

    def names(self) -> list[str]:
        """The wrappers, in order."""
        return [n for n, _, _ in self.wrappers]


def name_of(word: str) -> str:
    """A command word's program name (`/usr/bin/env` -> `env`)."""
    return posixpath.basename(word)


def read_through(argv: list[str], start: int = 0) -> Through:
    """Read the wrappers at argv[start:] to the program they run; stop at the first word that is not one."""
    out = Through(start)
    i = start
    while i < len(argv) and name_of(argv[i]) in TABLE:
        name = name_of(argv[i])
        spec = TABLE[name]
        first = i
        i += 1
        while i < len(argv):
            a = argv[i]
            if a == "--":
                i += 1
                break
            if spec.assigns and "=" in a and not a.startswith("-") and a.split("=", 1)[0].isidentifier():
                k, v = a.split("=", 1)
                out.env[k] = v
                i += 1
                continue
            if not a.startswith("-") or a == "-" and name != "env":
                break
            if name == "nice" and a[1:].lstrip("-").isdigit():  # `nice -10 CMD`: the old form
                i += 1
                continue
            opt, glued = (a.split("=", 1)[0], True) if a.startswith("--") and "=" in a else (a, False)
            if len(opt) > 2 and not opt.startswith("--") and opt[:2] in spec.takes_value:
                opt, glued = opt[:2], True  # `-oL`, `-n5`, `-N0`: the value glued to the option
            if opt in spec.not_a_wrapper:
                out.unknown = f"`{name} {a}` does not simply run the words after it as a program"
                out.index = len(argv)
                return out
            if opt in spec.takes_value:
                value = a.split("=", 1)[1] if glued and a.startswith("--") else a[2:] if glued else \
                    (argv[i + 1] if i + 1 < len(argv) else "")
                if opt in spec.chdir:
                    out.cwd = value
                if opt in spec.output_opts and not glued:
                    out.outputs.append(i + 1)
                if name == "env" and opt in ("-u", "--unset"):
                    out.unset.append(value)
                i += 1 if glued else 2
                continue
            if spec.long_take_value and opt.startswith("--") and not glued and opt not in spec.flags:
                if opt == "--chdir" and i + 1 < len(argv):
                    out.cwd = argv[i + 1]
                i += 2
                continue
            if spec.flags is None or opt in spec.flags or (len(opt) > 2 and not opt.startswith("--") and
                                                           all(f"-{c}" in spec.flags for c in opt[1:])):
                i += 1
                continue
            out.unknown = f"`{name}`'s option {a} is not one dfdoctor knows"
            out.index = i
            return out
        if spec.operands and i < len(argv):
            if spec.output_operand:
                out.outputs.append(i)
            i += spec.operands
            if name == "flock" and i < len(argv) and argv[i] in ("-c", "--command"):
                out.unknown = "`flock FILE -c COMMAND` runs a shell command"
                out.index = len(argv)
                return out
        if spec.runs_elsewhere and not out.elsewhere:
            out.elsewhere = spec.runs_elsewhere
        out.wrappers.append((name, argv[first:i], first))
    out.index = i
    return out


@dataclass(frozen=True)
class ShellCall:
    """How a shell was called: its `-c` script (or the script file it runs) and where that word is."""

    script_at: Optional[int]  # index of the `-c` string or of the script file; None: reads stdin
    command_string: bool  # `-c`: the word is shell text; else it names a file
    unknown: str = ""  # an option not understood, in words


def read_shell(argv: list[str]) -> ShellCall:
    """Read `SHELL [options] [-c] SCRIPT|FILE [args]` by option name (`--rcfile FILE`, `-o pipefail`, `-lc`)."""
    i, dash_c = 1, False
    while i < len(argv):
        a = argv[i]
        if a == "--" or a == "-":
            i += 1
            break
        if a in SHELL_OPTS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("--"):
            if a in SHELL_LONG_FLAGS:
                i += 1
                continue
            return ShellCall(None, False, f"the shell option {a} is not one dfdoctor knows")
        if a[:1] in "-+" and len(a) > 1:
            letters = a[1:]
            if "c" in letters and a[0] == "-":
                dash_c = True
            # `-eo pipefail`: a cluster whose last letter is o/O takes the next word
            i += 2 if letters[-1] in "oO" else 1
            continue
        break
    if i >= len(argv):
        return ShellCall(None, dash_c)
    return ShellCall(i, dash_c)
