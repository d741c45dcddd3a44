"""Word expansion as a POSIX shell does it, on what a launcher walk knows, and nothing it does not.

A word of a launcher script (`"$OLDPWD/train.py"`, `${LR:-0.01}`, `"$(cd "$(dirname "$0")" && pwd)"`) is
expanded from a `Scope`: the variables the walk has tracked, the positional arguments, `$0`, `BASH_SOURCE` and
the working directory. A value that cannot be known exactly (a variable set inside an `if`, the output of a
command that is not a known idiom, `$RANDOM`) is an `Unknown`: a str whose text is the word as written and
whose `why` names what could not be resolved. An expansion that touches an unknown is unknown as a whole; it
is never replaced by a guess.

Command substitution is evaluated only for the idioms launchers use to find files: `dirname`, `basename`,
`pwd`, `cd DIR && pwd`, `realpath`/`readlink -f`, `which`/`command -v`/`type -P`, `echo`/`printf %s`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from dfdoctor.lazy_re import compile_later


class Unknown(str):
    """A value that cannot be known without running the script: the text as written, and why."""

    why: str

    def __new__(cls, text: str, why: str) -> "Unknown":
        obj = str.__new__(cls, text)
        obj.why = why
        return obj

    def __reduce__(self):  # keep the reason across copies and pickles
        return (Unknown, (str(self), self.why))


Value = Union[str, Unknown]


class _Whole(str):
    """A value the shell does not split even unquoted: a default written in quotes (`${X:-"a b"}`)."""
_NAME = compile_later(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables a shell sets itself, different in every run: a script that reads them cannot be followed exactly.
_VOLATILE = {"RANDOM", "SRANDOM", "LINENO", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID", "PPID"}


@dataclass
class Scope:
    """What expansion may read: variables (values may be Unknown), positional args, $0, BASH_SOURCE, the cwd.

    `bash` is True under bash (BASH_SOURCE is set), False under dash/sh-that-is-dash (it is not), None when
    the shell is not known. `cwd` is the shell's directory (an Unknown once a `cd` could not be followed).
    """

    vars: dict[str, str] = field(default_factory=dict)
    args: Union[list[str], Unknown] = field(default_factory=list)
    zero: str = "sh"
    source: Optional[str] = None
    bash: Optional[bool] = True
    cwd: Union[Path, Unknown] = Path("/")

    def get(self, name: str) -> Optional[str]:
        """The value of a parameter (None when unset), as the script sees it."""
        if name == "0":
            return self.zero
        if name.isdigit():
            if isinstance(self.args, Unknown):
                return self.args
            n = int(name)
            return self.args[n - 1] if n <= len(self.args) else None
        if name == "#":
            return self.args if isinstance(self.args, Unknown) else str(len(self.args))
        if name in ("BASH_SOURCE", "BASH_SOURCE[0]"):
            if self.bash is None:
                return Unknown("$BASH_SOURCE", "BASH_SOURCE depends on which shell runs the script")
            return self.source if self.bash else None
        if name in ("$", "!", "?", "-") or name in _VOLATILE:
            return Unknown(f"${name}", f"${name} is only known while the script runs")
        return self.vars.get(name)


def expand(raw: str, scope: Scope) -> Union[list[str], Unknown]:
    """Expand one word as typed (quotes and all) into the fields the command receives, or an Unknown."""
    # imported here: commandline.py needs only Unknown, a plain `python3 t.py` parses no shell (issue 45)
    from dfdoctor.shell import ShellSyntaxError
    if raw in ('"$@"', '"${@}"'):  # the launcher's arguments, each one field (none when there are none)
        return scope.args if isinstance(scope.args, Unknown) else list(scope.args)
    fields: list[str] = []
    cur: list[str] = []
    have = False  # the current field exists even if empty (a quoted "" or '')

    def flush() -> None:
        nonlocal cur, have
        if have or cur:
            fields.append("".join(cur))
        cur, have = [], False

    def add_unquoted(v: str) -> None:
        """An unquoted expansion: split on whitespace (the default IFS); empty gives no field."""
        nonlocal cur, have
        if not v:
            return
        parts = v.split()
        if v[0].isspace():
            flush()
        for k, part in enumerate(parts):
            if k:
                flush()
            cur.append(part)
        if v[-1].isspace():
            flush()

    i, n = 0, len(raw)
    try:
        while i < n:
            ch = raw[i]
            if ch == "'":
                j = raw.index("'", i + 1)
                cur.append(raw[i + 1:j])
                have, i = True, j + 1
            elif ch == "$" and raw.startswith("$'", i):
                j = i + 2
                buf = []
                while raw[j] != "'":
                    if raw[j] == "\\":
                        buf.append({"n": "\n", "t": "\t", "'": "'", "\\": "\\"}.get(raw[j + 1], "\\" + raw[j + 1]))
                        j += 2
                        continue
                    buf.append(raw[j])
                    j += 1
                cur.append("".join(buf))
                have, i = True, j + 1
            elif ch == '"':
                i, have = _double_quoted(raw, i + 1, scope, cur, fields), True
                if isinstance(i, Unknown):
                    return Unknown(raw, i.why)
            elif ch == "\\":
                cur.append(raw[i + 1:i + 2])
                have, i = True, i + 2
            elif ch == "~" and i == 0:
                m = re.match(r"~([A-Za-z0-9_.-]*)", raw)
                if m.group(1):
                    return Unknown(raw, f"~{m.group(1)} is that user's home on the machine that runs it")
                home = scope.get("HOME")
                if home is None or isinstance(home, Unknown):
                    return Unknown(raw, "$HOME is not known")
                cur.append(home)
                i = m.end()
            elif ch == "$" or ch == "`":
                val, i = _dollar(raw, i, scope)
                if isinstance(val, Unknown):
                    return Unknown(raw, val.why)
                if isinstance(val, list):  # unquoted $@ / $*
                    for a in val:
                        add_unquoted(a)
                        flush()
                    continue
                if isinstance(val, _Whole):
                    cur.append(val)
                    have = True
                else:
                    add_unquoted(val or "")
            else:
                cur.append(ch)
                i += 1
    except (ValueError, IndexError, ShellSyntaxError):
        return Unknown(raw, f"`{raw}` is not a word dfdoctor can read")
    flush()
    return fields


def expand_one(raw: str, scope: Scope) -> Value:
    """Expand a word where the shell does no field splitting (an assignment's value, `cd`'s operand)."""
    out = expand(_protect(raw), scope)
    if isinstance(out, Unknown):
        return Unknown(raw, out.why)
    return " ".join(out)


def _protect(raw: str) -> str:
    """Wrap the expansions of an unquoted word in double quotes so they are not split (as in `A=$B`)."""
    out, i = [], 0
    while i < len(raw):
        ch = raw[i]
        if ch in "'\"":
            j = i + 1
            while j < len(raw) and raw[j] != ch:
                j += 2 if (ch == '"' and raw[j] == "\\") else 1
            out.append(raw[i:j + 1])
            i = j + 1
        elif ch == "\\":
            out.append(raw[i:i + 2])
            i += 2
        elif ch == "$" and not raw.startswith("$'", i):
            j = _end_of_dollar(raw, i)
            out.append('"' + raw[i:j] + '"')
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _end_of_dollar(raw: str, i: int) -> int:
    """Index just past the `$...` expansion starting at raw[i]."""
    from dfdoctor.shell import _read_quoted_subst  # imported here: see expand
    if raw.startswith("$(", i):
        return _read_quoted_subst(raw, i)
    if raw.startswith("${", i):
        return _end_of_braces(raw, i + 2) + 1
    m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", raw[i:])
    return i + (m.end() if m else 1)


def _end_of_braces(raw: str, j: int) -> int:
    """Index of the `}` closing a `${` whose body starts at raw[j] (nesting and quotes respected)."""
    depth = 1
    while j < len(raw):
        c = raw[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            j = raw.index("'", j + 1) + 1
            continue
        if c == '"':
            j += 1
            while raw[j] != '"':
                j += 2 if raw[j] == "\\" else 1
            j += 1
            continue
        if raw.startswith("${", j) or raw.startswith("$(", j):
            j = _end_of_dollar(raw, j)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ValueError("unterminated ${")


def _double_quoted(raw: str, i: int, scope: Scope, cur: list[str], fields: list[str]) -> Union[int, Unknown]:
    """Read a "..." starting after its quote into cur; "$@" adds fields. Returns the index after it."""
    while raw[i] != '"':
        ch = raw[i]
        if ch == "\\" and raw[i + 1] in '$`"\\\n':
            cur.append(raw[i + 1] if raw[i + 1] != "\n" else "")
            i += 2
        elif ch in "$`":
            if raw.startswith("$@", i) or raw.startswith("${@}", i):
                args = scope.args
                if isinstance(args, Unknown):
                    return args
                i += 2 if raw.startswith("$@", i) else 4
                if args:  # "x$@y" -> "xa1" "a2" ... "any"
                    cur.append(args[0])
                    for a in args[1:]:
                        fields.append("".join(cur))
                        cur[:] = [a]
                continue
            val, i = _dollar(raw, i, scope)
            if isinstance(val, Unknown):
                return val
            cur.append(" ".join(val) if isinstance(val, list) else (val or ""))
        else:
            cur.append(ch)
            i += 1
    return i + 1


def _dollar(raw: str, i: int, scope: Scope) -> tuple[Union[str, list[str], None, Unknown], int]:
    """One `$...` or backquoted expansion at raw[i]: its value (a list for unquoted $@/$*) and the next index."""
    from dfdoctor.shell import _read_quoted_subst  # imported here: see expand
    if raw[i] == "`":
        j = raw.index("`", i + 1)
        return substitute(raw[i + 1:j], scope), j + 1
    if raw.startswith("$((", i):
        j = _read_quoted_subst(raw, i)
        return Unknown(raw[i:j], f"arithmetic {raw[i:j]} is not evaluated"), j
    if raw.startswith("$(", i):
        j = _read_quoted_subst(raw, i)
        return substitute(raw[i + 2:j - 1], scope), j
    if raw.startswith("${", i):
        j = _end_of_braces(raw, i + 2)
        return _braced(raw[i + 2:j], scope), j + 1
    m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", raw[i:])
    if not m:
        return "$", i + 1
    name = m.group(1)
    if name in ("@", "*"):
        return (scope.args if isinstance(scope.args, Unknown) else list(scope.args)), i + m.end()
    return _value_of(name, scope), i + m.end()


def _value_of(name: str, scope: Scope) -> Value:
    """A plain `$NAME`: its value, '' when unset, Unknown when the walk could not know it."""
    v = scope.get(name)
    return "" if v is None else v


_BRACED = compile_later(r"^(?P<len>#)?(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\[0\])?|[0-9]+|[@*#?$!-])"
                        r"(?P<op>:-|-|:=|=|:\+|\+|:\?|\?|%%|%|##|#|/|:)?(?P<arg>.*)$", re.S)


def _braced(body: str, scope: Scope) -> Value:
    """`${...}`: defaults (`:-`, `-`, `:=`, `:+`), `:?`, pattern removal (`%`, `%%`, `#`, `##`) and `${#X}`."""
    m = _BRACED.match(body)
    if not m:
        return Unknown("${" + body + "}", f"${{{body}}} is not an expansion dfdoctor evaluates")
    name, op, arg = m.group("name"), m.group("op"), m.group("arg")
    val = scope.get(name)
    if m.group("len"):
        if op or arg:
            return Unknown("${" + body + "}", "not an expansion dfdoctor evaluates")
        return val if isinstance(val, Unknown) else str(len(val or ""))
    if op is None:
        return "" if val is None else val
    if isinstance(val, Unknown):
        return val
    unset, empty = val is None, not val
    if op in (":-", "-", ":=", "="):
        use_default = empty if op.startswith(":") else unset
        if not use_default:
            return val
        got = expand_one(arg, scope)
        return _Whole(got) if not isinstance(got, Unknown) and any(q in arg for q in "'\"") else got
    if op in (":+", "+"):
        use_alt = not empty if op.startswith(":") else not unset
        return expand_one(arg, scope) if use_alt else ""
    if op in (":?", "?"):
        bad = empty if op.startswith(":") else unset
        return Unknown("${" + body + "}", f"${name} is not set, so the shell stops here") if bad else val
    if op in ("%", "%%", "#", "##"):
        pat = expand_one(arg, scope)
        if isinstance(pat, Unknown):
            return pat
        return _remove(val or "", pat, op)
    return Unknown("${" + body + "}", f"${{{name}{op}...}} is not evaluated")


def _remove(val: str, pat: str, op: str) -> str:
    """Pattern removal: `%` shortest suffix, `%%` longest suffix, `#` shortest prefix, `##` longest prefix."""
    cuts = range(len(val), -1, -1) if op in ("%", "##") else range(0, len(val) + 1)
    for k in cuts:
        if op in ("%", "%%") and fnmatch.fnmatchcase(val[k:], pat):
            return val[:k]
        if op in ("#", "##") and fnmatch.fnmatchcase(val[:k], pat):
            return val[k:]
    return val


# ---- command substitution: the idioms that find a file ------------------------------------------------

def substitute(inner: str, scope: Scope) -> Value:
    """The output of `$(inner)` when it is made of the idioms launchers use to locate things; else Unknown."""
    from dfdoctor.shell import ShellSyntaxError, parse  # imported here: see expand
    text = f"$({inner.strip()})"
    try:
        pipelines = parse(inner)
    except ShellSyntaxError:
        return Unknown(text, f"{text} does not parse")
    cwd = scope.cwd
    out: list[str] = []
    for p in pipelines:
        ok = True
        for c in p.commands:
            if not ok:
                if c.sep == "||":
                    ok = True
                continue
            if c.assignments or any(r.to_file or r.op.startswith("<") for r in c.redirects) or c.sep in ("|", "|&"):
                return Unknown(text, f"{text} runs a command dfdoctor does not run")
            words: list[str] = []
            for w in c.words:
                got = expand(w.raw, Scope(scope.vars, scope.args, scope.zero, scope.source, scope.bash, cwd))
                if isinstance(got, Unknown):
                    return Unknown(text, got.why)
                words += got
            if not words:
                continue
            res = _idiom(words, cwd, scope)
            if res is None:
                return Unknown(text, f"{text} runs `{words[0]}`, which dfdoctor does not run")
            if isinstance(res, Unknown):
                return Unknown(text, res.why)
            kind, value = res
            if kind == "cd":
                if value is None:  # the folder is not there: cd fails, `&&` skips the rest
                    ok = False
                    continue
                cwd = value
            elif kind == "out":
                out.append(value)
            ok = True
    return "\n".join(out).rstrip("\n")


def _idiom(words: list[str], cwd: Union[Path, Unknown], scope: Scope):
    """Run one known, side-effect-free command on paths: ('out', text) | ('cd', Path or None) | Unknown | None."""
    name, args = words[0], words[1:]
    opts = [a for a in args if a.startswith("-") and a != "-"]
    operands = [a for a in args if not (a.startswith("-") and a != "-")]

    def absolute(p: str) -> Union[Path, Unknown]:
        if os.path.isabs(p):
            return Path(p)
        if isinstance(cwd, Unknown):
            return cwd
        return cwd / p

    if name == "dirname" and len(operands) == 1:
        return "out", os.path.dirname(operands[0].rstrip("/") or "/") or "."
    if name == "basename" and operands:
        b = os.path.basename(operands[0].rstrip("/")) or "/"
        if len(operands) > 1 and b.endswith(operands[1]) and b != operands[1]:
            b = b[:-len(operands[1])]
        return "out", b
    if name == "pwd":
        if isinstance(cwd, Unknown):
            return cwd
        return "out", str(Path(os.path.realpath(cwd)) if "-P" in opts else cwd)
    if name == "cd":
        if len(operands) != 1:
            return None
        p = absolute(operands[0])
        if isinstance(p, Unknown):
            return p
        return "cd", (Path(os.path.normpath(p)) if p.is_dir() else None)
    if name in ("realpath", "readlink") and len(operands) == 1 and (name == "realpath" or opts in (["-f"], ["-e"], ["-m"])):
        p = absolute(operands[0])
        if isinstance(p, Unknown):
            return p
        return "out", os.path.realpath(p)
    if (name == "which" and len(operands) == 1) or (name in ("command", "type") and opts in (["-v"], ["-P"])
                                                       and len(operands) == 1):
        path = scope.get("PATH")
        if isinstance(path, Unknown):
            return path
        found = shutil.which(operands[0], path=path or os.defpath)
        return "out", found or ""
    if name == "echo" and not opts:
        return "out", " ".join(args)
    if name == "printf" and args[:1] == ["%s"]:
        return "out", "".join(args[1:])
    return None

