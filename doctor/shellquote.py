"""Quoting words and argument vectors for a POSIX shell, the form a person would type (`shell.py` parses lines:
every target kind quotes, and a command that parses no line should not pay for the parser's classes)."""

from __future__ import annotations

from dfdoctor.lazy_re import compile_later

_SAFE = compile_later(r"[A-Za-z0-9_@%+=:,./-]+")  # no `~`: a shell expands it at a word's start and after `=`


def quote(s: str) -> str:
    """Quote one word for a POSIX shell, preferring the form a person would type."""
    if s and _SAFE.fullmatch(s):
        return s
    if "'" not in s:
        return f"'{s}'"
    if not any(c in s for c in '"$`\\!'):
        return f'"{s}"'
    return "'" + s.replace("'", "'\"'\"'") + "'"


_UNDECODABLE = compile_later("[\udc80-\udcff]")


def quote_typed(s: str) -> str:
    """`quote` for a line a person copies: a word with bytes that are not UTF-8 (lone surrogates here) in `$'…'`,
    where the `\\xNN` a report shows for each names that byte (in '…' it is four other characters: the line would
    name another file, S12). bash, zsh and ksh read it; dfdoctor's own `sh -c` sessions never get it."""
    if not _UNDECODABLE.search(s):
        return quote(s)
    return "$'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def join_typed(argv: list[str]) -> str:
    """`join` with `quote_typed`'s words."""
    words = [quote_typed(a) for a in argv]
    if argv and not _UNDECODABLE.search(argv[0]):
        words[0] = join(argv[:1])  # a first word with `=` stays no assignment
    return " ".join(words)


def join(argv: list[str]) -> str:
    """Quote and join an argument vector into one shell line (a first word with `=` would be an assignment)."""
    return " ".join(f"'{a}'" if i == 0 and "=" in a and "'" not in a else quote(a) for i, a in enumerate(argv))
