"""The files a job's command names, for the log's sake: `--log train.py -- python3 train.py` appended the job's
output to the user's own script. dfdoctor never writes into a file the user named for another purpose.

Standard library only, and cheap to import: `launch --no-check` asks it before the job starts. Which
of the paths exist, and whether one is the log's file, is judged where the job runs (the log probe there, and a
--target's recorder before it opens the log; here, `same_as`)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Optional

from dfdoctor.agent.same_file import same_file

# An option whose name says the job writes its own log at its value (--log-file, --logfile=, --log_path,
# --train-log): the job itself writes there, which is not "another purpose" (a warning, not a failure).
_LOG_OPTION = re.compile(r"^-{1,2}(?:[a-z0-9]+[-_.])*log(?:[-_.]?(?:file|path|name|out|output))?$", re.I)
_PYTHON = re.compile(r"^python[0-9.]*$")


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
    return named_files(ctx.command, ctx.abspath, script, modules)


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


def same_as(log: str, named: list[Named]) -> list[Named]:
    """Those of `named` that are the log's own file (same device and inode), judged on this machine by the agent's
    comparison (the recorder makes the same one where the job runs); nothing when the log does not exist yet or is
    not a regular file."""
    return [named[i] for i in same_file(log, [n.path for n in named])]
