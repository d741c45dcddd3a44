"""Which words of a launch line a rehearsal may let a shell expand (shared/REHEARSAL.md: a word runs only when it
is proved harmless).

A command substitution (`$(...)`, backquotes) runs a command wherever the shell meets it: in an `export`, an
assignment, a `cd`, a redirect's target, the job's own arguments, an unquoted here-document's body. One is
harmless only when everything it runs is a pure lookup (`dirname "$0"`, `pwd`, `date +%F`, `hostname`), itself
built of harmless words; anything else (`$(rm -f F)`, `$((...))`, a command not in PURE) is unproved, and the
words that hold it are not run.
"""

from __future__ import annotations

from typing import Optional

from dfdoctor.shell import Command, ShellSyntaxError, Word, _read_quoted_subst, parse

# Commands that only compute a string from their arguments or read a fact: nothing of the user's changes.
PURE = {"dirname", "basename", "pwd", "realpath", "readlink", "date", "hostname", "whoami", "id", "nproc",
        "uname", "echo", "printf", "cd", "true", ":"}
_MAX_DEPTH = 4


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
            if any(r.to_file or r.op.startswith("<") for r in c.redirects):
                return False
            if not all(harmless_word(w, depth + 1) for w in c.words):
                return False
    return True


def harmless_word(w: Word, depth: int = 0) -> bool:
    """Whether expanding this word runs nothing but harmless lookups."""
    return not w.substitution or all(harmless_text(t, depth) for t in substitutions(w.raw))


def unproved(c: Command) -> Optional[str]:
    """Why expanding this command's words would run something not proved harmless (None: all proved)."""
    for w in [*c.assignment_words, *c.words]:
        if not harmless_word(w):
            return f"`{_first(w.raw)}` runs a command when the shell expands it"
    for r in c.redirects:
        if r.target_substitution and not all(harmless_text(t) for t in substitutions(r.target_raw)):
            return f"the redirect's target `{_first(r.target_raw)}` runs a command when the shell expands it"
        if r.body_expands and not all(harmless_text(t) for t in substitutions(r.body, single_quotes=False)):
            return "the here-document's body holds a command substitution, which the shell runs"
    return None


def _first(raw: str) -> str:
    """A word as typed, shortened for a report."""
    return raw if len(raw) <= 60 else raw[:57] + "..."
