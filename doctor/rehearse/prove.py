"""Which words of a launch line a rehearsal may let a shell expand (shared/REHEARSAL.md: a word runs only when it
is proved harmless).

A command substitution (`$(...)`, backquotes) runs a command wherever the shell meets it: in an `export`, an
assignment, a `cd`, a redirect's target, the job's own arguments, an unquoted here-document's body. One is
harmless only when everything it runs is a pure lookup (`dirname "$0"`, `pwd`, `date +%F`, `hostname`), itself
built of harmless words; anything else (`$(rm -f F)`, `$((...))`, a command not in PURE) is unproved, and the
words that hold it are not run.

A value can also be run as code where no `$(` shows (round 4's S5): an array's index, a substring's offset and
`declare -i` evaluate arithmetic, which expands `a[$(cmd)]` held in a variable; `${x@P}` and `${!x}` expand a value
again; `printf -v` and `test -v` take an indexed name; xtrace expands PS4 before each command; BASH_ENV and ENV
name a file every non-interactive shell sources (S6). Each counts as code.
"""

from __future__ import annotations

import re
from typing import Optional

from dfdoctor.shell import Command, ShellSyntaxError, Word, _read_quoted_subst, parse
from dfdoctor.lazy_re import compile_later

# Commands that only compute a string from their arguments or read a fact: nothing of the user's changes.
PURE = {"dirname", "basename", "pwd", "realpath", "readlink", "date", "hostname", "whoami", "id", "nproc",
        "uname", "echo", "printf", "cd", "true", ":"}
_MAX_DEPTH = 4
# read-only forms of PURE commands whose other forms change something (`hostname NAME`, `date -s`, `date MMDDhhmm`)
_READ_ONLY = {"hostname": compile_later(r"-[sfidAaIy]+|--(short|fqdn|long|ip-address|all-ip-addresses|domain|alias)"),
              "date": compile_later(r"\+.*|-[uRI]+|-I[a-z]*|--(utc|universal|rfc-email|rfc-3339=\w+|iso-8601(=\w+)?)")}
# variables whose value the shell runs or expands as code later: prompts (PS4 under xtrace), files every
# non-interactive shell sources, options every bash imports
CODE_VARS = {"BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS"}
# builtins whose arguments name variables (an indexed name evaluates its index as arithmetic)
_NAMERS = {"declare", "typeset", "local", "readonly", "export", "unset"}
_NAME = compile_later(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM = compile_later(r"\$\{(!?)(#?)([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])(\[[^]]*\])?([^}]*)")


def substitutions(raw: str, *, single_quotes: bool = True) -> list[str]:
    """The texts of the command substitutions in `raw` (as typed), outermost only; `$((` counts as one."""
    out, i, n = [], 0, len(raw)
    in_double = False
    while i < n:
        ch = raw[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'" and single_quotes and not in_double:
            j = raw.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if ch == '"':
            in_double = not in_double
        elif ch == "$" and raw.startswith("$(", i):
            try:
                k = _read_quoted_subst(raw, i)
            except ShellSyntaxError:
                return [raw[i:]]
            out.append(raw[i + 2:k - 1])
            i = k
            continue
        elif ch == "`":
            j = raw.find("`", i + 1)
            out.append(raw[i + 1:] if j < 0 else raw[i + 1:j])
            i = n if j < 0 else j + 1
            continue
        i += 1
    return out


def harmless_text(text: str, depth: int = 0) -> bool:
    """Whether shell text run inside a substitution only computes a string (see PURE)."""
    if depth > _MAX_DEPTH or text.startswith("("):  # `$((...))`: arithmetic can index arrays with commands
        return False
    try:
        pipelines = parse(text)
    except ShellSyntaxError:
        return False
    for p in pipelines:
        for c in p.commands:
            if c.nest or c.assignment_words or not c.words or c.words[0].value not in PURE:
                return False
            rule = _READ_ONLY.get(c.words[0].value)
            if rule and not all(rule.fullmatch(w.value) for w in c.words[1:]):
                return False
            if any(r.to_file or r.op.startswith("<") for r in c.redirects):
                return False
            if not all(harmless_word(w, depth + 1) for w in c.words):
                return False
    return True


def harmless_word(w: Word, depth: int = 0) -> bool:
    """Whether expanding this word runs nothing but harmless lookups."""
    if expansion_code(w.raw):
        return False
    return not w.substitution or all(harmless_text(t, depth) for t in substitutions(w.raw))


def expansion_code(raw: str) -> Optional[str]:
    """Why expanding this text (as typed) may run a value as code, without any `$(` in it (None: it cannot)."""
    text = _outside_single_quotes(raw)
    if "$[" in text:
        return "`$[...]` is arithmetic, which runs a command held in an array's index"
    for m in _PARAM.finditer(text):
        bang, _, _, index, op = m.groups()
        if bang and not op.startswith(("*", "@")):
            return f"`{m.group(0)}}}` expands a variable's value again (an index in it runs a command)"
        if index and not re.fullmatch(r"\[\s*([0-9]+|@|\*)\s*\]", index):
            return f"`{m.group(0)}}}`: an array's index is arithmetic, which runs a command held in a variable"
        if op.startswith("@"):
            return f"`{m.group(0)}}}` expands the value again (as a prompt: a command in it runs)"
        if op.startswith(":") and not op.startswith((":-", ":=", ":+", ":?")) and \
                not re.fullmatch(r":[\s0-9-]*(:[\s0-9-]*)?", op):
            return f"`{m.group(0)}}}`: a substring's offset is arithmetic, which runs a command held in a variable"
    return None


def _outside_single_quotes(raw: str) -> str:
    """The text with what single quotes hold left out (nothing in them expands)."""
    out, i, quoted = [], 0, False
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and not quoted:
            out.append(raw[i:i + 2])
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        if ch == "'" and not quoted:
            j = raw.find("'", i + 1)
            i = len(raw) if j < 0 else j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def runs_a_value(c: Command) -> Optional[str]:
    """Why this command would later run a value as code (None: it would not): an assignment to a code variable,
    `declare -i`/`-n`, an indexed name, `printf -v`/`test -v` on one, xtrace."""
    argv = [w.value for w in c.words]
    names = [a.partition("=")[0] for a in c.assignments]
    cmd = argv[0] if argv else ""
    if cmd in _NAMERS:
        opts = [a for a in argv[1:] if a.startswith(("-", "+")) and "=" not in a]
        if cmd != "unset" and any(set(o[1:]) & {"i", "n"} for o in opts):
            return f"`{cmd} {' '.join(opts)}` evaluates values as arithmetic or names, which may run a command"
        names += [a.partition("=")[0] for a in argv[1:] if a not in opts]
    if cmd == "printf" and "-v" in argv[1:2]:
        names += argv[2:3]
    if cmd in ("test", "[") and "-v" in argv:
        names += argv[argv.index("-v") + 1:argv.index("-v") + 2]
    values = [*c.assignments, *(a for a in argv[1:] if cmd in _NAMERS and "=" in a)]
    for value in values:
        array = value.partition("=")[2]
        if array.startswith("(") and "[" in array:  # `a=([i]=1)`: an element's index is arithmetic, as in a[i]
            return f"`{_first(value)}`: an array element's index is arithmetic, which may run a command"
    for name in names:
        if name in CODE_VARS:
            return f"`{name}` holds code the shell runs later (a prompt or a file every shell sources)"
        if not _NAME.fullmatch(name) and not re.fullmatch(r"[A-Za-z_]\w*\[[0-9]+\]", name):
            return f"`{name}`: an indexed name's index is arithmetic, which may run a command"
    if cmd == "set" and any(a.startswith("-") and "x" in a[1:] and not a.startswith("--") for a in argv[1:]) or \
            cmd == "set" and "xtrace" in argv and "-o" in argv:
        return "xtrace expands PS4 before each command, which may run a command"
    return None


def unproved(c: Command) -> Optional[str]:
    """Why expanding this command's words would run something not proved harmless (None: all proved)."""
    for w in [*c.assignment_words, *c.words]:
        if not harmless_word(w):
            return expansion_code(w.raw) or f"`{_first(w.raw)}` runs a command when the shell expands it"
    value = runs_a_value(c)
    if value:
        return value
    for r in c.redirects:
        if r.target_substitution and not all(harmless_text(t) for t in substitutions(r.target_raw)):
            return f"the redirect's target `{_first(r.target_raw)}` runs a command when the shell expands it"
        if r.body_expands and not all(harmless_text(t) for t in substitutions(r.body, single_quotes=False)):
            return "the here-document's body holds a command substitution, which the shell runs"
    return None


def _first(raw: str) -> str:
    """A word as typed, shortened for a report."""
    return raw if len(raw) <= 60 else raw[:57] + "..."
