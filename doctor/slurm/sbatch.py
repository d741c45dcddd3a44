"""An sbatch submission read the way sbatch reads it: command-line options first, then SBATCH_* environment
variables, then the script's #SBATCH lines (which stop at the first command line of the script)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from dfdoctor.safefile import read_head_text

# long name -> short letter, for the options whose value we use (or must skip over when reading argv).
_SHORT = {"J": "job-name", "o": "output", "e": "error", "D": "chdir", "p": "partition", "N": "nodes",
          "n": "ntasks", "c": "cpus-per-task", "t": "time", "G": "gpus", "d": "dependency", "a": "array",
          "q": "qos", "A": "account", "w": "nodelist", "i": "input", "C": "constraint", "x": "exclude",
          "M": "clusters", "b": "begin", "L": "licenses", "k": "no-kill", "W": "wait", "s": "oversubscribe",
          "H": "hold", "Q": "quiet", "v": "verbose", "h": "help", "V": "version", "F": "nodefile",
          "m": "distribution", "S": "core-spec", "B": "extra-node-info"}
# Options that take no value (everything else takes one).
_FLAGS = {"exclusive", "parsable", "wait", "hold", "quiet", "verbose", "help", "version", "no-kill",
          "no-requeue", "requeue", "overcommit", "oversubscribe", "contiguous", "test-only", "usage",
          "ignore-pbs", "spread-job", "use-min-nodes", "reboot", "nice", "get-user-env", "wait-all-nodes"}
_OPTIONAL_VALUE = {"exclusive", "nice", "get-user-env", "no-kill"}
# SBATCH_* environment variables and the option each stands for (man sbatch, INPUT ENVIRONMENT VARIABLES).
ENV = {"SBATCH_JOB_NAME": "job-name", "SBATCH_OUTPUT": "output", "SBATCH_ERROR": "error",
       "SBATCH_PARTITION": "partition", "SBATCH_TIMELIMIT": "time", "SBATCH_GPUS": "gpus",
       "SBATCH_GPUS_PER_NODE": "gpus-per-node", "SBATCH_GRES": "gres", "SBATCH_MEM_PER_CPU": "mem-per-cpu",
       "SBATCH_MEM_PER_NODE": "mem", "SBATCH_QOS": "qos", "SBATCH_ACCOUNT": "account",
       "SBATCH_ARRAY_INX": "array", "SBATCH_EXCLUSIVE": "exclusive", "SBATCH_INPUT": "input",
       "SBATCH_OPEN_MODE": "open-mode", "SBATCH_CONSTRAINT": "constraint", "SBATCH_RESERVATION": "reservation",
       "SBATCH_WAIT": "wait", "SBATCH_EXPORT": "export"}
MAX_READ = 8 << 20  # more than Slurm's 4 MiB script limit, so an oversized script is still read


@dataclass
class Submission:
    """One sbatch submission: the effective options (and where each came from), the script and its words."""

    options: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # option -> "command line" | "SBATCH_X" | "#SBATCH"
    script: Optional[Path] = None
    script_args: list[str] = field(default_factory=list)
    script_text: str = ""
    wrap: Optional[str] = None
    unknown: list[str] = field(default_factory=list)  # words we did not understand (said, never ignored)
    sbatch_argv: list[str] = field(default_factory=list)  # sbatch's own options as typed
    argv: list[str] = field(default_factory=list)  # the whole sbatch line as typed (sbatch first)
    ignored: list[tuple[int, str, str]] = field(default_factory=list)  # #SBATCH lines sbatch never reads
    script_size: int = 0
    asked: Optional[object] = None  # what `sbatch --test-only` answered (slurm.testonly.Asked), asked once

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self.options.get(name, default)

    def int_opt(self, name: str) -> Optional[int]:
        """An integer option (`--nodes 2`, `-c 8`); for a range `2-4` its lower bound; None when absent or odd."""
        v = self.options.get(name)
        if v is None:
            return None
        try:
            return int(v.split("-")[0].split(":")[0])
        except ValueError:
            return None

    @property
    def job_name(self) -> str:
        return self.options.get("job-name") or (self.script.name if self.script else "wrap")

    @property
    def workdir(self) -> Optional[str]:
        return self.options.get("chdir")


def _canonical(name: str) -> str:
    return _SHORT.get(name, name) if len(name) == 1 else name


def read_options(words: Sequence[str]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Options from sbatch-style words: ([(name, value)], the rest after the options, words not understood)."""
    out: list[tuple[str, str]] = []
    odd: list[str] = []
    i = 0
    words = list(words)
    while i < len(words):
        w = words[i]
        if w == "--":
            return out, words[i + 1:], odd
        if not w.startswith("-") or w == "-":
            return out, words[i:], odd
        if w.startswith("--"):
            name, eq, val = w[2:].partition("=")
            if eq:
                out.append((name, val))
            elif name in _FLAGS or name in _OPTIONAL_VALUE:
                out.append((name, ""))
            elif i + 1 < len(words):
                out.append((name, words[i + 1]))
                i += 1
            else:
                odd.append(w)
        else:
            letter, rest = w[1:2], w[2:]
            name = _canonical(letter)
            if letter not in _SHORT:
                odd.append(w)
            elif name in _FLAGS:
                out.append((name, ""))
            elif rest:
                out.append((name, rest[1:] if rest.startswith("=") else rest))
            elif i + 1 < len(words):
                out.append((name, words[i + 1]))
                i += 1
            else:
                odd.append(w)
        i += 1
    return out, [], odd


def directives(text: str) -> list[str]:
    """The words of the script's #SBATCH lines, up to its first command (sbatch stops reading there)."""
    return read_script(text)[0]


def read_script(text: str) -> tuple[list[str], list[tuple[int, str, str]]]:
    """(the words of the #SBATCH lines sbatch reads, [(line number, line, why sbatch ignores it)]).

    sbatch's own rule (src/sbatch/opt.c): a line that starts with `#SBATCH` in its first column is read; a blank
    line or any other comment is passed over; the first line that is neither is the first command, and nothing
    after it is read. An indented `#SBATCH` is a comment to sbatch."""
    words: list[str] = []
    ignored: list[tuple[int, str, str]] = []
    stopped_at = 0
    for n, line in enumerate(text.split("\n"), 1):
        if stopped_at:
            if line.lstrip().startswith("#SBATCH"):
                ignored.append((n, line, f"after the first command (line {stopped_at})"))
            continue
        if line.startswith("#SBATCH"):
            words += _argument_words(line[len("#SBATCH"):])
            continue
        s = line.lstrip()
        if s.startswith("#SBATCH"):
            ignored.append((n, line, "indented: sbatch reads #SBATCH only in the first column"))
        if s and not s.startswith("#"):
            stopped_at = n
    return words, ignored


def _argument_words(body: str) -> list[str]:
    """An #SBATCH line's words as sbatch splits them (its _get_argument): quotes group and are dropped, a
    backslash keeps the next character whatever it is (inside quotes too) and is dropped, an unescaped `#`
    outside quotes starts a comment."""
    words: list[str] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i].isspace():
            i += 1
        if i >= n:
            return words
        arg: list[str] = []
        quote, escaped = "", False
        while i < n and (quote or not body[i].isspace()):
            c = body[i]
            i += 1
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
                continue
            elif quote:
                if c == quote:
                    quote = ""
                    continue
            elif c == "#":
                if arg:
                    words.append("".join(arg))
                return words
            elif c in "\"'":
                quote = c
                continue
            arg.append(c)
        if arg:
            words.append("".join(arg))


def parse(argv: Sequence[str], cwd: Path, env: Optional[Mapping[str, str]] = None) -> Submission:
    """Read `sbatch [OPTIONS] SCRIPT [ARGS]` (argv starts with sbatch) against `cwd` and `env`."""
    env = dict(os.environ if env is None else env)
    words = list(argv[1:]) if argv and Path(argv[0]).name == "sbatch" else list(argv)
    cli, rest, odd = read_options(words)
    sub = Submission(unknown=list(odd), sbatch_argv=words[:len(words) - len(rest)],
                     argv=[argv[0] if argv and Path(argv[0]).name == "sbatch" else "sbatch", *words])
    wrap = next((v for k, v in cli if k == "wrap"), None)
    if wrap is not None:
        sub.wrap = wrap
        sub.script_text = f"#!/bin/sh\n{wrap}\n"
    elif rest:
        p = Path(rest[0])
        sub.script = p if p.is_absolute() else cwd / p
        sub.script_args = rest[1:]
        try:
            sub.script_size = sub.script.stat().st_size
            sub.script_text = sub.script.read_bytes()[:MAX_READ].decode(errors="replace")
        except OSError:
            sub.script_text = ""
    words_in_script, sub.ignored = read_script(sub.script_text)
    script_opts, _, script_odd = read_options(words_in_script)
    sub.unknown += [f"#SBATCH {w}" for w in script_odd]
    for name, value in script_opts:
        sub.options[name], sub.origin[name] = value, "#SBATCH"
    for var, name in ENV.items():
        if var in env:
            sub.options[name], sub.origin[name] = env[var], var
    for name, value in cli:
        sub.options[name], sub.origin[name] = value, "command line"
    return sub


def from_script(path: Path, cwd: Path, env: Optional[Mapping[str, str]] = None) -> Submission:
    """`--launcher job.sbatch`: the submission `sbatch job.sbatch` would make."""
    return parse(["sbatch", str(path)], cwd, env)


def is_sbatch(argv: Sequence[str]) -> bool:
    """Whether a command is an sbatch submission."""
    return bool(argv) and Path(argv[0]).name == "sbatch"


def is_batch_script(path: Optional[Path]) -> bool:
    """Whether a --launcher is a batch script (it has #SBATCH lines)."""
    if path is None:
        return False
    head = read_head_text(path, 65536)  # its head only: a file named by mistake is never read whole
    return head is not None and (bool(directives(head)) or path.suffix == ".sbatch")


def is_slurm(ctx) -> bool:
    """Whether the launch under examination (a `Context`) is an sbatch submission."""
    return is_sbatch(ctx.command) or (not ctx.command and is_batch_script(ctx.launcher))
