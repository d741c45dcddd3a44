"""The files a job's command names, for the log's sake: `--log train.py -- python3 train.py` appended the job's
output to the user's own script. dfdoctor never writes into a file the user named for another purpose.

Standard library only, and cheap to import: `launch --no-check` asks it before the job starts. Which
of the paths exist, and whether one is the log's file, is judged where the job runs (the log probe there, and a
--target's recorder before it opens the log; here, `same_as`)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from typing import Callable, Optional

from dfdoctor.agent.same_file import same_file
from dfdoctor.lazy_re import compile_later

# An option whose name says the job writes its own log at its value (--log-file, --logfile=, --log_path,
# --train-log): the job itself writes there, which is not "another purpose" (a warning, not a failure).
_LOG_OPTION = compile_later(r"^-{1,2}(?:[a-z0-9]+[-_.])*log(?:[-_.]?(?:file|path|name|out|output))?$", re.I)
_PYTHON = compile_later(r"^python[0-9.]*$")


@dataclass(frozen=True)
class Named:
    """One path the command names. `role`: program, script, module, argument or log-option; `word`: the words
    that name it, as typed (`--config config/train.yaml`)."""
    path: str
    role: str
    word: str

    def what(self) -> str:
        """The file, in words, for a finding: `train.py is the job's own script`."""
        return {"program": "is the job's own program", "script": "is the job's own script",
                "module": f"is the module the job runs ({self.word})",
                "log-option": f"is the job's own log ({self.word})"}.get(
                    self.role, f"is named by the job's command ({self.word})")


def named_files(argv: list[str] | tuple[str, ...], abspath: Callable[[str], object],
                script: Optional[object] = None, module_files: tuple = ()) -> list[Named]:
    """Every argv word, and the value of each `--key=value` word, as a path resolved by `abspath` (against the
    job's working directory); the script and the module file the parsed command runs, when the caller knows
    them. Whether they exist is not asked here: that is judged where the job runs."""
    out: list[Named] = []
    seen: set[str] = set()

    def add(path: object, role: str, word: str) -> None:
        p = str(path)
        if p not in seen:
            seen.add(p)
            out.append(Named(p, role, word))

    if script is not None:
        add(script, "script", str(script))
    for path, word in module_files:
        add(path, "module", word)
    words = list(argv)
    is_python = bool(words) and bool(_PYTHON.match(os.path.basename(words[0])))
    script_at = _script_index(words) if is_python else None
    for i, word in enumerate(words):
        if not word or word == "-":
            continue
        prev = words[i - 1] if i else ""
        if word.startswith("-") and "=" in word:
            key, value = word.split("=", 1)
            if value:
                add(abspath(value), "log-option" if _LOG_OPTION.match(key) else "argument", word)
            continue
        if word.startswith("-"):
            continue
        if i == 0:
            role = "program"
        elif i == script_at:
            role = "script"
        elif prev.startswith("-") and _LOG_OPTION.match(prev):
            role = "log-option"
        else:
            role = "argument"
        add(abspath(word), role, f"{prev} {word}" if prev.startswith("-") else word)
    return out


def named_by(ctx) -> list[Named]:
    """The files a check's or launch's command names (`named_files`), with the script and `-m` module file its
    parsed line runs, resolved against its working directory as the log is. Nothing where dfdoctor does not write
    the log (--no-redirect). One list for log.writable and for `launch --no-check`'s refusal."""
    if ctx.no_redirect or not ctx.command:
        return []
    from dfdoctor.launchline.commandline import spec_for  # the line's reader: only where a --log is given
    script, modules = None, ()
    try:
        spec = spec_for(ctx)
        if spec.script is not None:
            script = ctx.abspath(spec.script)
        if spec.module:
            base = ctx.abspath(spec.module.replace(".", "/"))
            word = f"-m {spec.module}"
            modules = ((f"{base}.py", word), (os.path.join(str(base), "__main__.py"), word))
    except Exception:
        pass  # a line the reader cannot parse: its argv words alone
    named = named_files(ctx.command, ctx.abspath, script, modules)
    here = bool(getattr(ctx.target, "runs_here", True))
    seen = {n.path for n in named}
    for n in _on_path(ctx.command, ctx.env, here) + _in_shell_line(ctx.command, ctx.abspath, ctx.env, here):
        if n.path not in seen:
            seen.add(n.path)
            named.append(n)
    return named


def _on_path(argv, env, here: bool) -> list[Named]:
    """argv[0] without a slash runs the file PATH finds (`run.sh` is not ./run.sh): that file, when the job runs
    here (a --target's PATH is not read from here)."""
    word = argv[0] if argv else ""
    if not here or not word or "/" in word:
        return []
    found = shutil.which(word, path=(env or {}).get("PATH", os.defpath))
    return [Named(os.path.abspath(found), "program", word)] if found else []


# Shell operators after which a word is a command's name again; redirections whose next word the line writes
# (the job's own output: another writer, not another purpose, so not named here) or reads from a here-document.
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", ";;", "|&"}
_WRITES = compile_later(r"^[0-9]*(?:>|>>|>\||&>|&>>|>&|<<|<<-|<<<)$")


def _in_shell_line(argv, abspath: Callable[[str], object], env, here: bool, depth: int = 0) -> list[Named]:
    """The files named inside `bash -c "python3 train.py --config c.yaml"` (sh, dash, -lc, ...): a launch runs the
    line as typed, so its words are the command's too. Conservative: only a word (or a `--key=value`'s value)
    that is an existing regular file where the job runs here (there: any word, which the comparison there finds
    or not), not a redirection's output (the job's own log) nor `tee`'s files, nor a relative word after a `cd`
    (its folder is not the job's)."""
    from dfdoctor.launchline.wrappers import read_shell  # loaded with the line reader named_by imports anyway
    words = list(argv)
    if depth > 3 or not words or os.path.basename(words[0]) not in ("sh", "bash", "dash", "zsh", "ksh"):
        return []
    call = read_shell(words)
    if not call.command_string or call.script_at is None or call.script_at >= len(words):
        return []
    lexer = shlex.shlex(words[call.script_at], posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: nothing read rather than a guess
        return []
    out: list[Named] = []
    at_command, moved, teeing, skip_next = True, False, False, False
    command: list[str] = []
    for i, tok in enumerate(tokens):
        if tok in _SEPARATORS:
            out += _in_shell_line(command, abspath, env, here, depth + 1)
            at_command, teeing, command = True, False, []
            continue
        if skip_next or _WRITES.match(tok):
            skip_next = not skip_next  # the operator, then its word
            continue
        if tok in ("<",):
            continue
        if at_command and "=" in tok and not tok.startswith(("-", "=")):
            continue  # `CUDA_VISIBLE_DEVICES=0 python3 ...`: an assignment before the command
        command.append(tok)
        first, at_command = at_command, False
        if first and tok in ("cd", "pushd", "popd"):
            moved = True  # relative words after it are relative to another folder
        if first and os.path.basename(tok) == "tee":
            teeing = True
        if teeing or (first and tok in ("cd", "pushd", "popd")):
            continue
        prev = tokens[i - 1] if i else ""
        for value, word in ((tok, f"{prev} {tok}" if prev.startswith("-") else tok),
                            (tok.split("=", 1)[1] if tok.startswith("-") and "=" in tok else "", tok)):
            if not value or value.startswith("-") or (moved and not os.path.isabs(value)):
                continue
            path = str(abspath(value))
            if here and not os.path.isfile(path):
                continue
            key = tok.split("=", 1)[0] if value is not tok else prev  # `--log-file x`, `--log-file=x`
            role = "program" if first else "log-option" if key.startswith("-") and _LOG_OPTION.match(key) else \
                "argument"
            out.append(Named(path, role, word))
        if first and here and "/" not in tok:
            out += _on_path([tok], env, here)
    return out + _in_shell_line(command, abspath, env, here, depth + 1)


def suggested_log(named: list[Named], log: str) -> str:
    """A log path of its own beside the job: logs/<the script's or the log's stem>.log."""
    script = next((n.path for n in named if n.role == "script"), None)
    stem = os.path.splitext(os.path.basename(script or log))[0]
    return f"logs/{stem or 'train'}.log"


def _script_index(words: list[str]) -> Optional[int]:
    """Where the script is in `python [opts] script args` (None for -m, -c or no script)."""
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-m", "-c"):
            return None
        if w in ("-W", "-X", "-Q"):
            i += 2
            continue
        if not w.startswith("-"):
            return i
        i += 1
    return None


def put_to_another_purpose(log: str, named: list[Named]) -> list[Named]:
    """Those of `named` that are the log's own file (`same_as`) and named for another purpose: not the value of
    the job's own log option (its log, written by the job too: a shared writer, not a file put to another use)."""
    return [n for n in same_as(log, named) if n.role != "log-option"]


def same_as(log: str, named: list[Named]) -> list[Named]:
    """Those of `named` that are the log's own file (same device and inode), judged on this machine by the agent's
    comparison (the recorder makes the same one where the job runs); nothing when the log does not exist yet or is
    not a regular file."""
    return [named[i] for i in same_file(log, [n.path for n in named])]
