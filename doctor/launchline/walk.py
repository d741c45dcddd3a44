"""Walk a launcher script the way its shell would run it, up to the command that starts the job.

The walk reads the script with `shell.parse` (one tokenizer for every reader of shell text) and keeps what
the shell keeps: the working directory through `cd`/`pushd` (and `PWD`/`OLDPWD` with it), variables set by
assignments, `export`, `readonly`, `declare`, `set -a`, `unset`, positional arguments (`shift`, `set --`),
files read with `source`/`.` (walked in place when they can be read; a venv's `activate` puts its `bin/`
first on PATH), and `exec > LOG`. Words are expanded by `expand`, exactly or not at all.

What depends on a command whose outcome is not known (a branch of an `if`, a loop or function body, the rest
of an `&&` list after a command dfdoctor does not run) is `Unknown` afterwards, with the reason: the walk
never keeps a value the script may have changed, and never guesses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Union

from dfdoctor.launchline.envs import env_prefix
from dfdoctor.launchline.expand import Scope, Unknown, expand, expand_one
from dfdoctor.shell import Command, ShellSyntaxError, parse
from dfdoctor.numbers import whole
from dfdoctor.lazy_re import compile_later

MAX_SOURCE_BYTES = 256 * 1024
_ASSIGN = compile_later(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
_REDIRECT_HEAD = compile_later(r"^\d*(&>>|&>|<<<|<<-|<<|>>|>\||>&|<&|<>|>|<)\s*")
# Commands that change neither the shell's state nor the files a launch needs, and (nearly) always succeed.
_INERT = {"echo", "printf", "true", ":", "trap", "ulimit", "umask", "wait", "sleep", "shopt", "date",
          "hostname", "pwd", "hash", "alias", "nvidia-smi", "ls", "cat", "sync", "printenv", "which",
          "type", "command", "module", "ml", "nproc", "free", "df", "id", "whoami", "uname", "env"}
# The shell's builtins that assign (and may export) the variables named after them.
_DECLARES = frozenset({"export", "declare", "typeset", "local", "readonly"})
_WHY_COND = {"if": "inside an `if`", "while": "inside a `while` loop", "until": "inside an `until` loop",
             "for": "inside a `for` loop", "case": "inside a `case`", "function": "inside a function"}


@dataclass
class WalkState:
    """What the shell knows at one point of the script."""

    scope: Scope
    exported: set[str] = field(default_factory=set)
    allexport: bool = False
    errexit: bool = False
    stdout: Union[str, Unknown, None] = None  # `exec > LOG`: where the rest of the script's stdout goes
    dirs: list = field(default_factory=list)  # pushd's stack
    notes: list[str] = field(default_factory=list)  # what the walk could not follow, in words
    ended: Optional[str] = None  # the script stops here (exit, a failing `cd` under set -e): why
    failed: bool = False  # ... because a command failed on something observed (a folder or file not there)
    alone: bool = True  # the command being walked is a list of its own (`set -e` ignores failures inside && / ||)
    made: set = field(default_factory=set)  # folders the script's own `mkdir` creates
    fs_changed: Optional[str] = None  # the first command it did not run that may create or move files

    @property
    def cwd(self) -> Union[Path, Unknown]:
        return self.scope.cwd

    def copy(self) -> "WalkState":
        s = self.scope
        scope = Scope(dict(s.vars), s.args if isinstance(s.args, Unknown) else list(s.args), s.zero, s.source,
                      s.bash, s.cwd)
        return WalkState(scope, set(self.exported), self.allexport, self.errexit, self.stdout, list(self.dirs),
                         self.notes, self.ended, self.failed, self.alone, set(self.made), self.fs_changed)

    def missing(self, path: Path) -> Optional[str]:
        """Why `path`, absent now, may still be there when the script reaches this point (None: it will not)."""
        return None if path in self.made else self.fs_changed

    def environment(self) -> dict[str, str]:
        """The variables a command started here receives (values may be Unknown)."""
        return {k: v for k, v in self.scope.vars.items() if k in self.exported}


# The job's command line has been found: given its words (expanded; Unknown where unresolved), the folder,
# the environment it gets and the variables its own prefix sets, the caller says what it runs, or None when
# the line is not the job (`mkdir`, `nvidia-smi`, ...). The state is passed for nested launchers.
Follow = Callable[[list, Union[Path, Unknown], dict, dict, "WalkState"], Optional[object]]


@dataclass
class Found:
    """The job line the walk stopped at, the state there, and what it could not resolve on the way."""

    spec: object
    state: WalkState
    command: Command
    line: str
    redirect: Union[str, Unknown, None]
    unknown: list[str]


def start_state(env: dict[str, str], cwd: Union[Path, Unknown], zero: str, source: Optional[str],
                args: list[str], bash: Optional[bool]) -> WalkState:
    """The state of a shell that starts a script: the job's environment, PWD set to where it starts."""
    vars_ = dict(env)
    vars_["PWD"] = str(cwd) if not isinstance(cwd, Unknown) else cwd
    # Shells differ on an inherited OLDPWD (bash drops it when it is not a folder), and it is the caller's
    # previous folder, not the job's: not a value to build a path on.
    vars_["OLDPWD"] = Unknown("$OLDPWD", "$OLDPWD is the caller's previous folder until the script runs `cd`")
    return WalkState(Scope(vars_, args if isinstance(args, Unknown) else list(args), zero, source, bash, cwd),
                     exported=set(env) | {"PWD", "OLDPWD"})


def walk(text: str, state: WalkState, follow: Follow, *, depth: int = 0, cond: Optional[str] = None) -> Optional[Found]:
    """Walk shell text from `state` (changed in place) to the first command `follow` says is the job."""
    try:
        pipelines = parse(text)
    except ShellSyntaxError as exc:
        state.notes.append(f"the script does not parse ({exc}); the walk stops there")
        return None
    conds: dict[int, Optional[bool]] = {}  # each `if`'s condition, as far as it is known
    for p in pipelines:
        before = state.copy()
        chain_unsure: Optional[str] = None  # why the rest of this and-or list may not run
        prev_ok: Optional[bool] = True
        for i, c in enumerate(p.commands):
            if c.header:
                continue
            op = p.commands[i - 1].sep if i else None
            if op == "&&" and prev_ok is False or op == "||" and prev_ok is True:
                continue  # the shell skips it; prev_ok keeps the list's status
            if op in ("&&", "||") and prev_ok is None and chain_unsure is None:
                chain_unsure = f"line {c.line}: it runs only if `{p.commands[i - 1].text()}` " + \
                               ("succeeds" if op == "&&" else "fails")
            runs, if_why = _branch(c, conds)
            if runs is False:
                continue  # a branch the condition rules out
            why = cond or _why_nested(c) or if_why
            state.alone = len(p.commands) == 1
            found = _command(c, state, follow, depth, why, chain_unsure)
            if isinstance(found, Found):
                if found.command is c:  # (a job found in a sourced file keeps that file's line)
                    found.line = p.text()
                return found
            prev_ok = found
            if c.branches and c.branches[-1][1] == "cond":
                conds[c.branches[-1][0]] = found if runs else None
            if state.ended:
                return None
        if p.background or any(c.sep in ("|", "|&") for c in p.commands) or all("subshell" in c.nest
                                                                                  for c in p.commands):
            _restore(state, before)  # a subshell's cd and variables end with it
        elif chain_unsure:  # the list stopped somewhere unknown: what it changed is unknown afterwards
            _join(state, before, chain_unsure)
    return None


def _why_nested(c: Command) -> Optional[str]:
    """Why a command may or may not run, from the loops, cases and functions around it (`if`: `_branch`)."""
    for kind in c.nest:
        if kind in _WHY_COND and kind != "if":
            return _WHY_COND[kind]
    return None


def _branch(c: Command, conds: dict[int, Optional[bool]]) -> tuple[Optional[bool], Optional[str]]:
    """Whether the `if` branches around a command let it run: True, False, or None (with why not known)."""
    for n, part in c.branches:
        if part == "cond":
            continue
        value = conds.get(n)
        if part == "elif" or value is None:
            return None, "inside an `if` whose condition is not known"
        if value != (part == "then"):
            return False, None
    return True, None


def _restore(state: WalkState, before: WalkState) -> None:
    """Back to the state before a part of the script that ran in a subshell (keeping what was noted)."""
    notes = state.notes
    state.__dict__.update(before.copy().__dict__)
    state.notes = notes


def _join(state: WalkState, before: WalkState, why: str) -> None:
    """After a part of the script that may or may not have run: what it changed becomes Unknown."""
    for k, v in list(state.scope.vars.items()):
        if before.scope.vars.get(k) != v or type(before.scope.vars.get(k)) is not type(v):
            state.scope.vars[k] = Unknown(f"${k}", f"${k} changes at {why}")
    for k in set(before.scope.vars) - set(state.scope.vars):
        state.scope.vars[k] = Unknown(f"${k}", f"${k} is unset at {why}")
    if str(state.scope.cwd) != str(before.scope.cwd) or type(state.scope.cwd) is not type(before.scope.cwd):
        state.scope.cwd = Unknown("$PWD", f"the folder changes at {why}")
    if state.scope.args != before.scope.args:
        state.scope.args = Unknown("$@", f"the arguments change at {why}")


def _command(c: Command, state: WalkState, follow: Follow, depth: int, cond: Optional[str],
             chain_unsure: Optional[str]) -> Union[Found, bool, None]:
    """Apply one simple command to the state; return the Found job, or the command's outcome (None: unknown)."""
    where = f"line {c.line}, {cond}" if cond else None
    if not c.words:  # assignments alone: `A=1 B=$A`, in order
        for a in c.assignments:
            _assign(state, a, where, export=state.allexport)
        return True
    words: list = []
    for w in c.words:
        got = expand(w.raw, state.scope)
        words += [got] if isinstance(got, Unknown) else got
    if not words:
        return True
    head = words[0]
    if isinstance(head, Unknown):
        spec = follow(words, state.cwd, state.environment(), _prefix(c, state), state)
        if spec is not None:
            return _found(spec, c, state, cond, chain_unsure)
        state.notes.append(f"line {c.line}: `{c.text()}` was not followed ({head.why})")
        return None
    name = os.path.basename(head)
    if name in _DECLARES:
        flags = [w for w in words[1:] if str(w).startswith(("-", "+"))]
        for raw in [w.raw for w in c.words[1:] if not w.raw.startswith(("-", "+"))]:
            m = _ASSIGN.match(raw)
            if m:
                _assign(state, raw, where, export=name == "export" or "-x" in flags or state.allexport)
            elif name == "export" or "-x" in flags:
                state.exported.add(raw)
        return True
    if name == "unset":
        for w in words[1:]:
            if not str(w).startswith("-"):
                _set(state, str(w), None, where)
        return True
    if name == "set":
        return _set_builtin(state, words[1:], where)
    if name == "shift":
        n = whole(str(words[1]), 1) if len(words) > 1 else 1
        args = state.scope.args
        state.scope.args = args if isinstance(args, Unknown) else (
            args[n:] if not where else Unknown("$@", f"`shift` at {where}"))
        return True
    if name in ("cd", "pushd", "popd"):
        return _cd(state, name, words[1:], where)
    if name in ("source", ".") and len(words) > 1:
        return _source(state, words[1], words[2:], follow, depth, where)
    if name in ("conda", "mamba", "micromamba") and len(words) > 2 and words[1] == "activate":
        return _activate_conda(state, name, words[2], where)
    if name == "exit" or (name == "exec" and len(words) == 1):
        if name == "exec":
            for r in c.redirects:
                if 1 in r.fds and r.to_file:
                    state.stdout = _redirect_target(r.raw, state)
            return True
        if not where and not chain_unsure:
            state.ended = f"line {c.line}: `{c.text()}` ends the script"
        return None
    if name in ("test", "[", "[["):
        return _test(words[1:], state)
    if name == "false":
        return False
    if name == "mkdir":
        return _mkdir(state, words[1:])
    spec = follow(words, state.cwd, state.environment(), _prefix(c, state), state)
    if spec is not None:
        return _found(spec, c, state, cond, chain_unsure)
    if name in _INERT:
        return True
    if state.fs_changed is None:
        state.fs_changed = f"`{c.text()}` (line {c.line}), which dfdoctor does not run, may create or move it"
    return None


def _mkdir(state: WalkState, args: list) -> Optional[bool]:
    """`mkdir [-p] DIR...`: the folders exist from here on (as far as the walk can tell)."""
    for a in args:
        if isinstance(a, Unknown):
            state.fs_changed = state.fs_changed or f"`mkdir {a}` creates a folder whose name is not known"
            return None
        if str(a).startswith("-"):
            continue
        p = Path(a) if os.path.isabs(a) else (state.cwd / a if isinstance(state.cwd, Path) else None)
        if p is None:
            state.fs_changed = state.fs_changed or f"`mkdir {a}` in a folder that is not known"
            return None
        p = Path(os.path.normpath(p))
        state.made.update({p, *[q for q in p.parents if not q.exists()]})
    return True


def _found(spec, c: Command, state: WalkState, cond: Optional[str], chain_unsure: Optional[str]) -> Found:
    """The job line: its redirect (its own, else `exec > LOG` earlier) and why it may not run."""
    redirect: Union[str, Unknown, None] = None
    for r in c.redirects:
        if 1 in r.fds:
            redirect = _redirect_target(r.raw, state) if r.to_file else None
    if redirect is None and not any(1 in r.fds for r in c.redirects):
        redirect = state.stdout
    unknown = []
    if cond:
        unknown.append(f"line {c.line}: `{c.text()}` is {cond}: whether it runs is not known without running "
                       "the script")
    return Found(spec, state, c, c.text(), redirect, unknown)


def _prefix(c: Command, state: WalkState) -> dict:
    """`A=1 B=$A python ...`: the variables the command's own prefix gives it."""
    out: dict = {}
    scope = Scope({**state.scope.vars}, state.scope.args, state.scope.zero, state.scope.source, state.scope.bash,
                  state.scope.cwd)
    for a in c.assignments:
        m = _ASSIGN.match(a)
        if m:
            v = expand_one(m.group(3), scope)
            scope.vars[m.group(1)] = v
            out[m.group(1)] = v
    return out


def _assign(state: WalkState, raw: str, where: Optional[str], export: bool) -> None:
    """`NAME=value` (or `NAME+=value`) as the shell does it; exported if asked or already in the environment."""
    m = _ASSIGN.match(raw)
    if not m:
        return
    name, append, value = m.group(1), m.group(2), expand_one(m.group(3), state.scope)
    if append:
        old = state.scope.vars.get(name) or ""
        value = old if isinstance(old, Unknown) else (value if isinstance(value, Unknown) else old + value)
    _set(state, name, value, where)
    if export:
        state.exported.add(name)


def _set(state: WalkState, name: str, value, where: Optional[str]) -> None:
    """Set (value) or unset (None) a variable; inside a branch the result is Unknown."""
    if where:
        state.scope.vars[name] = Unknown(f"${name}", f"${name} is {'set' if value is not None else 'unset'} at {where}")
    elif value is None:
        state.scope.vars.pop(name, None)
    else:
        state.scope.vars[name] = value


def _set_builtin(state: WalkState, args: list, where: Optional[str]) -> bool:
    """`set -e`, `set -a`, `set -o errexit`, `set -- a b c`."""
    for k, a in enumerate(args):
        a = str(a)
        if a == "--":
            rest = [str(x) for x in args[k + 1:]]
            state.scope.args = Unknown("$@", f"`set --` at {where}") if where or any(
                isinstance(x, Unknown) for x in args[k + 1:]) else rest
            return True
        if a.startswith(("-", "+")) and not a.startswith(("--", "-o", "+o")):
            on = a[0] == "-"
            if "e" in a:
                state.errexit = on and not where
            if "a" in a:
                state.allexport = on and not where
    if "errexit" in [str(a) for a in args]:
        state.errexit = not where and "-o" in [str(a) for a in args]
    if "allexport" in [str(a) for a in args]:
        state.allexport = not where and "-o" in [str(a) for a in args]
    return True


def _cd(state: WalkState, name: str, args: list, where: Optional[str]) -> Optional[bool]:
    """`cd DIR`, `cd`, `cd -`, `pushd DIR`, `popd`: the new folder, PWD and OLDPWD, or Unknown."""
    old = state.scope.cwd
    operands = [a for a in args if not (str(a).startswith("-") and str(a) != "-")]
    if name == "popd":
        target = state.dirs.pop() if state.dirs and not where else Unknown("$PWD", "`popd` with an unknown stack")
    elif not operands:
        target = state.scope.vars.get("HOME") if name == "cd" else Unknown("$PWD", "`pushd` without a folder")
        if target is None:
            target = Unknown("$HOME", "$HOME is not set")
    elif operands[0] == "-" and name == "cd":
        target = state.scope.vars.get("OLDPWD") or Unknown("$OLDPWD", "$OLDPWD is not set")
    else:
        target = operands[0]
    cdpath = state.scope.vars.get("CDPATH")
    if isinstance(target, Unknown):
        new = Unknown(target, f"`{name} {target}`: {target.why}")
    elif cdpath and not os.path.isabs(target) and not target.startswith(("./", "../")) and target not in (".", ".."):
        new = Unknown(target, f"`{name} {target}` searches $CDPATH")
    elif not os.path.isabs(target) and isinstance(old, Unknown):
        new = Unknown(target, f"`{name} {target}` is relative to a folder that is not known ({old.why})")
    else:
        new = Path(os.path.normpath(target if os.path.isabs(target) else old / target))
    ok: Optional[bool] = None
    if isinstance(new, Path):
        if new.is_dir() or new in state.made:
            ok = True
        elif state.missing(new):
            new = Unknown(str(new), f"{new} is not there now, but {state.missing(new)}")
        else:  # the folder is not there: cd fails and the shell stays where it was
            if state.errexit and state.alone and not where:
                state.ended = f"`{name} {target}` fails ({new} is not a folder) and `set -e` ends the script"
                state.failed = True
            state.notes.append(f"`{name} {target}`: {new} is not a folder, so the shell stays in {old}")
            return False
    if where:
        new = Unknown("$PWD", f"`{name}` at {where}")
    if name == "pushd":
        state.dirs.append(old)
    state.scope.cwd = new
    state.scope.vars["OLDPWD"] = str(old) if not isinstance(old, Unknown) else old
    state.scope.vars["PWD"] = str(new) if not isinstance(new, Unknown) else new
    return ok


def _source(state: WalkState, word, args: list, follow: Follow, depth: int, where: Optional[str]):
    """`source FILE` / `. FILE`: a venv's activate, or any readable file walked in place."""
    if isinstance(word, Unknown):
        state.notes.append(f"`source {word}` was not read ({word.why}); what it sets is unknown")
        _forget_everything(state, f"`source {word}`")
        return None
    path = _source_path(state, word)
    if isinstance(path, Unknown):
        state.notes.append(f"`source {word}` was not read ({path.why}); what it sets is unknown")
        _forget_everything(state, f"`source {word}`")
        return None
    if path is None or not path.is_file():
        state.notes.append(f"`source {word}`: {path or word} is not there; the shell goes on without it")
        if state.errexit and state.alone and not where:
            state.ended = f"`source {word}` fails ({path or word} is not there) and `set -e` ends the script"
            state.failed = True
        return False
    if path.name == "activate" and args:  # conda's `source .../bin/activate NAME`
        return _activate_conda(state, "conda", args[0], where)
    venv = _venv_of(path)
    if venv is not None:
        _enter_env(state, venv, "VIRTUAL_ENV", where)
        return True
    if depth >= 4:
        _forget_everything(state, f"`source {word}` (sourced too deep)")
        return None
    try:
        text = path.read_bytes()[:MAX_SOURCE_BYTES].decode("utf-8", "replace")
    except OSError as exc:
        state.notes.append(f"`source {word}`: {exc.strerror}; the shell goes on without it")
        return False
    saved = (state.scope.source, state.scope.args)
    state.scope.source = str(word)
    if args:
        state.scope.args = list(args) if not any(isinstance(a, Unknown) for a in args) else Unknown("$@", "unknown")
    found = walk(text, state, follow, depth=depth + 1, cond=where)
    if found is not None:
        return found
    state.scope.source, state.scope.args = saved[0], saved[1] if args else state.scope.args
    return True


def _source_path(state: WalkState, word: str) -> Union[Path, Unknown, None]:
    """Where `source WORD` reads from: a path with a slash from the folder; else PATH, then (bash) the folder."""
    cwd = state.scope.cwd
    if "/" in word:
        if os.path.isabs(word):
            return Path(word)
        return cwd / word if not isinstance(cwd, Unknown) else Unknown(word, f"relative to an unknown folder ({cwd.why})")
    path = state.scope.vars.get("PATH") or ""
    if isinstance(path, Unknown):
        return Unknown(word, f"looked up on $PATH ({path.why})")
    for d in path.split(os.pathsep):
        if d and (Path(d) / word).is_file():
            return Path(d) / word
    if state.scope.bash is False:
        return None  # dash reads `. FILE` from PATH only
    if isinstance(cwd, Unknown):
        return Unknown(word, f"relative to an unknown folder ({cwd.why})")
    return cwd / word


_VENV_LINE = compile_later(r"""^\s*(?:export\s+)?VIRTUAL_ENV=(['"]?)(/[^'"\n]*)\1\s*$""", re.M)


def _venv_of(path: Path) -> Optional[Path]:
    """The environment a venv's `bin/activate` enters: the folder written in it (where it was created)."""
    if path.name != "activate" or path.parent.name != "bin":
        return None
    try:
        text = path.read_text(errors="replace")[:MAX_SOURCE_BYTES]
    except OSError:
        return None
    found = _VENV_LINE.findall(text)
    return Path(found[-1][1]) if found else Path(os.path.normpath(path.parent.parent))


def _activate_conda(state: WalkState, tool: str, name, where: Optional[str]):
    """`conda activate NAME`: that environment's bin/ first on PATH, when its folder can be found."""
    if isinstance(name, Unknown):
        prefix = None
    else:
        key = "-p" if "/" in name else "-n"
        prefix = env_prefix(tool, {key: name}, state.scope.cwd if isinstance(state.scope.cwd, Path) else Path("/"),
                             {k: v for k, v in state.scope.vars.items() if not isinstance(v, Unknown)})
    if prefix is None:
        why = f"`{tool} activate {name}`: dfdoctor could not find that environment's folder"
        state.scope.vars["PATH"] = Unknown("$PATH", why)
        state.scope.vars["CONDA_PREFIX"] = Unknown("$CONDA_PREFIX", why)
        state.notes.append(why)
        return None
    _enter_env(state, prefix, "CONDA_PREFIX", where)
    return True


def _enter_env(state: WalkState, prefix: Path, var: str, where: Optional[str]) -> None:
    """Put an environment's bin/ first on PATH (what activate does)."""
    path = state.scope.vars.get("PATH", os.defpath)
    new = path if isinstance(path, Unknown) else f"{prefix / 'bin'}{os.pathsep}{path}"
    _set(state, "PATH", new, where)
    _set(state, var, str(prefix), where)
    state.exported.update({"PATH", var})
    if not where:
        state.scope.vars.pop("PYTHONHOME", None)


def _forget_everything(state: WalkState, what: str) -> None:
    """A sourced file that cannot be read may change anything: every variable and the folder are unknown."""
    for k in list(state.scope.vars):
        state.scope.vars[k] = Unknown(f"${k}", f"{what} may change it")
    state.scope.cwd = Unknown("$PWD", f"{what} may change the folder")


def _redirect_target(raw: str, state: WalkState):
    """The file a redirect writes to, expanded and made absolute."""
    got = expand_one(_REDIRECT_HEAD.sub("", raw, count=1), state.scope)
    if isinstance(got, Unknown) or os.path.isabs(got):
        return got
    cwd = state.scope.cwd
    return Unknown(got, f"relative to an unknown folder ({cwd.why})") if isinstance(cwd, Unknown) \
        else os.path.normpath(cwd / got)


def _test(args: list, state: WalkState) -> Optional[bool]:
    """`[ -f FILE ]`, `[ -z "$X" ]`, `[ "$A" = b ]`, `!`: the answer, or None when it depends on an unknown."""
    args = list(args)
    if args and args[-1] in ("]", "]]"):
        args = args[:-1]
    neg = False
    while args and args[0] == "!":
        neg, args = not neg, args[1:]
    if any(isinstance(a, Unknown) for a in args):
        return None
    res: Optional[bool] = None
    if len(args) == 1:
        res = bool(args[0])
    elif len(args) == 2 and args[0] in ("-z", "-n"):
        res = (args[1] == "") == (args[0] == "-z")
    elif len(args) == 2 and args[0] in ("-f", "-d", "-e", "-r", "-x", "-s", "-L", "-h"):
        cwd = state.scope.cwd
        if not os.path.isabs(args[1]) and isinstance(cwd, Unknown):
            return None
        p = Path(os.path.normpath(Path(args[1]) if os.path.isabs(args[1]) else cwd / args[1]))
        if p in state.made:
            return (args[0] in ("-d", "-e", "-r", "-x")) != neg
        if not p.exists() and state.fs_changed:
            return None  # not there now; a command before may create it
        res = {"-f": p.is_file, "-d": p.is_dir, "-e": p.exists, "-L": p.is_symlink, "-h": p.is_symlink,
               "-r": lambda: os.access(p, os.R_OK), "-x": lambda: os.access(p, os.X_OK),
               "-s": lambda: p.is_file() and p.stat().st_size > 0}[args[0]]()
    elif len(args) == 3 and args[1] in ("=", "==", "!="):
        res = (args[0] == args[2]) == (args[1] != "!=")
    if res is None:
        return None
    return res != neg
