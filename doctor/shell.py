"""Just enough POSIX shell syntax to see a launch line the way each shell on its path sees it.

`shlex` cannot tell `2>&1` from `2 >&1`, nor a quoted `'&'` from the operator, so this is a small tokenizer of
its own: words keep both their value (quotes removed) and their raw text, and redirects and control operators
are tokens of their own. Enough for launch lines and launcher scripts; not a full shell (no arithmetic, no
parameter expansion; `$(...)` and backquotes are kept as opaque text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Optional, Union

# the quoting lives in shellquote.py (no dataclasses: every target kind quotes, few commands parse a line)
from dfdoctor import shellquote
from dfdoctor.lazy_re import compile_later

join, join_typed, quote, quote_typed = shellquote.join, shellquote.join_typed, shellquote.quote, shellquote.quote_typed

CONTROL_OPS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")")
REDIRECT_OPS = ("&>>", "&>", "<<<", "<<-", "<<", ">>", ">|", ">&", "<&", "<>", ">", "<")
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
            "{", "}", "!", "time"}
# Used with fullmatch: `$` would also match before a trailing newline and let "word\n" through unquoted.
_ASSIGNMENT = compile_later(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ARRAY_START = compile_later(r"[A-Za-z_][A-Za-z0-9_]*\+?=")  # what comes before a compound assignment's `(`


class ShellSyntaxError(ValueError):
    """The text is not a line a shell would accept (e.g. an unterminated quote)."""


@dataclass(frozen=True)
class Word:
    """One shell word: `value` as the command receives it, `raw` as typed."""

    value: str
    raw: str
    quoted: bool = False
    dynamic: bool = False  # contains $var, $(...) or `...`: the value is only a guess
    # contains $(...), $((...)) or `...` outside single quotes: expanding it runs commands (doctor/rehearse/prove)
    substitution: bool = False
    # Where `raw` lies in the text that was tokenized: a rehearsal splices its edits there (doctor/rehearse).
    start: int = field(default=-1, compare=False)
    end: int = field(default=-1, compare=False)


@dataclass(frozen=True)
class Redirect:
    """`[fd]op target`, e.g. `2>&1` is Redirect(2, '>&', '1')."""

    fd: Optional[int]
    op: str
    target: str
    raw: str
    start: int = field(default=-1, compare=False)
    end: int = field(default=-1, compare=False)
    target_raw: str = field(default="", compare=False)  # the target word as typed (quotes kept)
    target_dynamic: bool = field(default=False, compare=False)  # holds $var, $(...) or `...` outside '...'
    target_substitution: bool = field(default=False, compare=False)  # holds $(...) or `...` outside '...'
    # a here-document's body, and whether the shell expands it (an unquoted delimiter: `$(...)` in it runs)
    body: str = field(default="", compare=False)
    body_expands: bool = field(default=False, compare=False)

    @property
    def fds(self) -> tuple[int, ...]:
        """The descriptors this redirect replaces."""
        if self.op in ("&>", "&>>"):
            return (1, 2)
        if self.fd is not None:
            return (self.fd,)
        return (0,) if self.op.startswith("<") else (1,)

    @property
    def to_file(self) -> Optional[str]:
        """The file this redirect writes to, if it writes to one (not a dup like `2>&1`, not /dev/null)."""
        # `<>` opens for reading and writing (creating the file, writing in place): a write like the others
        if self.op in (">", ">>", ">|", "&>", "&>>", "<>") or (self.op == ">&" and not self.target.isdigit()
                                                          and self.target != "-"):
            return None if self.target == "/dev/null" else self.target
        return None


@dataclass(frozen=True)
class Op:
    """A control operator (`&&`, `;`, `&`, `|`, ...) or a newline (`\\n`)."""

    op: str


Token = Union[Word, Redirect, Op]


@dataclass
class Command:
    """A simple command: assignments, words and redirects, and the operator that ends it."""

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    assignment_words: list[Word] = field(default_factory=list)  # the same, as words (where they lie, what they hold)
    sep: str = ""  # the operator after it: && || | ; & \n or "" at the end
    line: int = 1
    # The compound commands it sits in, outermost first: "if", "while", "until", "for", "case", "function",
    # "subshell", "group" (`{ ...; }`). Empty at a script's top level, where it runs exactly once, in order.
    nest: tuple[str, ...] = ()
    header: bool = False  # the word list of a `for`/`select`/`case` header (`x in a b`), not a command
    # For each `if` around it, outermost first: (that if's number, the part it is in: "cond" | "then" |
    # "else" | "elif"), so a reader that can evaluate the condition knows whether the command runs.
    branches: tuple[tuple[int, str], ...] = ()

    @property
    def argv(self) -> list[str]:
        """The argument vector as the program receives it."""
        return [w.value for w in self.words]

    def span(self) -> tuple[int, int]:
        """Where the whole command (assignments, words, redirects) lies in the text it was parsed from."""
        parts = [*self.assignment_words, *self.words, *self.redirects]
        return min(p.start for p in parts), max(p.end for p in parts)

    def text(self) -> str:
        """The command as typed (assignments, words, redirects)."""
        return " ".join([*self.assignments, *(w.raw for w in self.words), *(r.raw for r in self.redirects)])


@dataclass
class Pipeline:
    """An and-or list: commands joined by `&&`, `||` or `|`, ended by `;`, `&` or a newline."""

    commands: list[Command]
    background: bool = False

    def text(self) -> str:
        """The list as typed, operators included."""
        parts = []
        for c in self.commands:
            parts.append(c.text())
            if c.sep in ("&&", "||", "|", "|&"):
                parts.append(c.sep)
        return " ".join(parts) + (" &" if self.background else "")


def _read_quoted_subst(s: str, i: int) -> int:
    """Index just past a `$(...)` starting at s[i] == '$', nesting and quotes respected."""
    depth, j = 0, i + 1
    while j < len(s):
        ch = s[j]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        elif ch == "'":
            k = s.find("'", j + 1)
            if k < 0:
                break
            j = k
        elif ch == '"':
            k = j + 1
            while k < len(s) and s[k] != '"':
                k += 2 if s[k] == "\\" else 1
            j = k
        elif ch == "\\":
            j += 1
        j += 1
    raise ShellSyntaxError("unterminated $( ... )")


def tokenize(s: str) -> list[Token]:
    """Split shell text into words, redirects and operators (newlines kept as `Op('\\n')`)."""
    toks: list[Token] = []
    i, n = 0, len(s)
    pending_heredocs: list[tuple[str, bool, int]] = []  # (delimiter, <<-, index of its Redirect token)
    while i < n:
        ch = s[i]
        if ch == "\\" and i + 1 < n and s[i + 1] == "\n":
            i += 2
            continue
        if ch in " \t\r":
            i += 1
            continue
        if ch == "\n":
            toks.append(Op("\n"))
            i += 1
            for delim, strip, at in pending_heredocs:  # a here-document's body is data, not commands
                body = []
                while i < n:
                    end = s.find("\n", i)
                    line = s[i:] if end < 0 else s[i:end]
                    i = n if end < 0 else end + 1
                    if (line.lstrip("\t") if strip else line) == delim:
                        break
                    body.append(line)
                r = toks[at]
                assert isinstance(r, Redirect)
                toks[at] = replace(r, body="\n".join(body), body_expands=not r.target_raw or r.target_raw == r.target
                                   and "\\" not in r.target_raw)
            pending_heredocs = []
            continue
        if ch == "#":
            end = s.find("\n", i)
            i = n if end < 0 else end
            continue
        m = re.match(r"(\d*)(&>>|&>|<<<|<<-|<<|>>|>\||>&|<&|<>|>|<)", s[i:])
        if m:
            fd = int(m.group(1)) if m.group(1) else None
            op = m.group(2)
            j = i + m.end()
            while j < n and s[j] in " \t":
                j += 1
            target, j2 = _read_word(s, j)
            if target is None:
                raise ShellSyntaxError(f"redirect {op!r} has no target")
            if op in ("<<", "<<-"):
                pending_heredocs.append((target.value, op == "<<-", len(toks)))
            toks.append(Redirect(fd, op, target.value, s[i:j2], i, j2, target.raw, target.dynamic,
                                 target.substitution))
            i = j2
            continue
        op = next((o for o in CONTROL_OPS if s.startswith(o, i)), None)
        if op:
            toks.append(Op(op))
            i += len(op)
            continue
        word, i = _read_word(s, i)
        if word is not None:
            toks.append(word)
    return toks


def _read_word(s: str, i: int) -> tuple[Optional[Word], int]:
    """Read one word starting at s[i]; return it (None if at a metacharacter) and the index after it."""
    n, start = len(s), i
    out: list[str] = []
    quoted = dynamic = subst = False
    while i < n:
        ch = s[i]
        if ch == "(" and _ARRAY_START.fullmatch(s[start:i]):
            j = _array_end(s, i)  # `a=(1 2)`: one word, as bash reads it (a compound assignment, not a subshell)
            out.append(s[i:j])
            dynamic, subst, i = True, subst or "$(" in s[i:j] or "`" in s[i:j] or "[" in s[i:j], j
            continue
        if ch in " \t\r\n;&|<>()":
            break
        if ch == "'":
            j = s.find("'", i + 1)
            if j < 0:
                raise ShellSyntaxError("unterminated ' quote")
            out.append(s[i + 1:j])
            quoted, i = True, j + 1
        elif ch == "$" and s.startswith("$'", i):
            j = i + 2
            buf = []
            while j < n and s[j] != "'":
                if s[j] == "\\" and j + 1 < n:
                    buf.append({"n": "\n", "t": "\t", "'": "'", "\\": "\\"}.get(s[j + 1], "\\" + s[j + 1]))
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            if j >= n:
                raise ShellSyntaxError("unterminated $' quote")
            out.append("".join(buf))
            quoted, i = True, j + 1
        elif ch == '"':
            j = i + 1
            buf = []
            while j < n and s[j] != '"':
                if s[j] == "\\" and j + 1 < n and s[j + 1] in '$`"\\\n':
                    if s[j + 1] != "\n":
                        buf.append(s[j + 1])
                    j += 2
                    continue
                if s[j] == "$" and s.startswith("$(", j):
                    k = _read_quoted_subst(s, j)
                    buf.append(s[j:k])
                    dynamic, subst, j = True, True, k
                    continue
                if s[j] in "$`":
                    dynamic = True
                    subst = subst or s[j] == "`"
                buf.append(s[j])
                j += 1
            if j >= n:
                raise ShellSyntaxError('unterminated " quote')
            out.append("".join(buf))
            quoted, i = True, j + 1
        elif ch == "\\":
            if i + 1 < n and s[i + 1] == "\n":
                i += 2
                continue
            out.append(s[i + 1:i + 2])
            quoted, i = True, i + 2
        elif ch == "$" and s.startswith("$(", i):
            k = _read_quoted_subst(s, i)
            out.append(s[i:k])
            dynamic, subst, i = True, True, k
        elif ch == "`":
            j = s.find("`", i + 1)
            if j < 0:
                raise ShellSyntaxError("unterminated ` quote")
            out.append(s[i:j + 1])
            dynamic, subst, i = True, True, j + 1
        else:
            if ch == "$" or (ch == "~" and i == start):
                dynamic = True
            out.append(ch)
            i += 1
    if i == start:
        return None, i
    return Word("".join(out), s[start:i], quoted, dynamic, subst, start, i), i


def _array_end(s: str, i: int) -> int:
    """Index just past the `)` closing the compound assignment `(...)` that starts at s[i], quotes and `$(...)`
    respected."""
    j = i + 1
    while j < len(s):
        if s[j] == ")":
            return j + 1
        if s[j] in "'\"" or s[j] == "`":
            k = s.find(s[j], j + 1)
            if k < 0:
                raise ShellSyntaxError(f"unterminated {s[j]} quote")
            j = k + 1
            continue
        if s.startswith("$(", j):
            j = _read_quoted_subst(s, j)
            continue
        j += 2 if s[j] == "\\" else 1
    raise ShellSyntaxError("unterminated ( ... ) in an array assignment")


def parse(s: str) -> list[Pipeline]:
    """Parse shell text into and-or lists of simple commands (grouping parentheses are flattened)."""
    pipelines: list[Pipeline] = []
    current: list[Command] = []
    cmd = Command()
    line = 1

    def end_command(sep: str) -> None:
        """Close the simple command being read at operator `sep`."""
        nonlocal cmd
        cmd.sep = sep
        if cmd.words or cmd.redirects or cmd.assignments:
            current.append(cmd)
        cmd = Command(line=line)

    def end_list(background: bool) -> None:
        """Close the and-or list being read; `background` when it ended in `&`."""
        nonlocal current
        if current:
            pipelines.append(Pipeline(current, background))
        current = []

    stack: list[str] = []  # the compound commands open around the current one
    ifs: list[list] = []  # [number, part] of each open `if`
    toks = tokenize(s)

    def begin() -> None:
        """Stamp the command being read with where it sits, when its first part arrives."""
        if not (cmd.words or cmd.redirects or cmd.assignments):
            cmd.nest = tuple(stack)
            cmd.branches = tuple((n, part) for n, part in ifs)

    def close(*kinds: str) -> None:
        """Pop the innermost open compound of one of these kinds (and anything left open inside it)."""
        for k in range(len(stack) - 1, -1, -1):
            if stack[k] in kinds:
                del stack[k:]
                return

    for ti, tok in enumerate(toks):
        if isinstance(tok, Word):
            if not cmd.words and tok.value in RESERVED and not tok.quoted:
                # `if`, `do`, `{`: what follows is still a simple command, one level deeper
                if tok.value in _OPENERS:
                    stack.append(_OPENERS[tok.value])
                    if tok.value in ("for", "select", "case"):
                        cmd.header = True
                    if tok.value == "if":
                        ifs.append([ti, "cond"])
                elif tok.value in ("then", "else", "elif") and ifs:
                    ifs[-1][1] = {"then": "then" if ifs[-1][1] == "cond" else "elif"}.get(tok.value, tok.value) \
                        if ifs[-1][1] != "elif" else "elif"
                elif tok.value in _CLOSERS:
                    if tok.value == "fi" and ifs:
                        ifs.pop()
                    close(*_CLOSERS[tok.value])
                elif tok.value == "{":
                    stack.append("function" if _pending_function(toks, ti) else "group")
                elif tok.value == "}":
                    close("function", "group")
                continue
            if cmd.header and tok.value in ("in", "do") and not tok.quoted:
                if tok.value == "do":  # `for x in a b; do cmd`: the loop body starts
                    end_command(";")
                continue
            if cmd.words and cmd.words[0].value == "function" and tok.value == "{" and not tok.quoted:
                cmd.words = []  # `function name {`: a definition, not a command
                stack.append("function")
                continue
            if not cmd.words and _ASSIGNMENT.match(tok.raw):  # `A="x y"`: the name itself is never quoted
                begin()
                cmd.assignments.append(tok.raw)
                cmd.assignment_words.append(tok)
                continue
            begin()
            cmd.words.append(tok)
        elif isinstance(tok, Redirect):
            begin()
            cmd.redirects.append(tok)
        else:
            if tok.op == "(":
                if len(cmd.words) == 1 and ti + 1 < len(toks) and toks[ti + 1] == Op(")"):
                    cmd.words = []  # `name() {`: a function definition; its body follows
                elif cmd.words and cmd.words[0].value == "function":
                    cmd.words = []
                elif not cmd.words:
                    stack.append("subshell")
                continue
            if tok.op == ")":
                if ti > 0 and toks[ti - 1] == Op("("):
                    continue  # the `()` of a function definition
                if stack and stack[-1] == "case":
                    cmd.words, cmd.assignments, cmd.redirects = [], [], []  # `pattern)`: not a command
                    cmd.assignment_words = []
                    continue
                end_command(";")
                end_list(False)
                close("subshell")
                continue
            end_command(tok.op)
            if tok.op == "\n":
                line += 1
                cmd.line = line
            if tok.op in (";", "&", "\n", ";;"):
                end_list(tok.op == "&")
    end_command("")
    end_list(False)
    return pipelines


_OPENERS = {"if": "if", "while": "while", "until": "until", "for": "for", "select": "for", "case": "case"}
_CLOSERS = {"fi": ("if",), "done": ("while", "until", "for"), "esac": ("case",)}


def _pending_function(toks: list[Token], i: int) -> bool:
    """Whether the `{` at toks[i] opens a function body (`name() {`, possibly after a newline)."""
    j = i - 1
    while j >= 0 and toks[j] == Op("\n"):
        j -= 1
    return j >= 1 and toks[j] == Op(")") and toks[j - 1] == Op("(")
