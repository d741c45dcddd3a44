"""Module-level patterns compiled on first use (dfdoctor.lazy_re): they match as re.compile's do, importing the
command line compiles none of dfdoctor's own, and every one of them compiles (an import no longer shows a bad
pattern: this test does). Each pattern's use is tested where its module is (the rules' tests, the renderers')."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest
from dfdoctor.lazy_re import LaterPattern, compile_later
from support import import_graph


@pytest.mark.parametrize("pattern,flags", [(r"(?P<k>\w+)=(?P<v>\d+)", 0), (r"^step (\d+)", re.M), (rb"\x00+", 0)])
def test_a_later_pattern_answers_as_the_compiled_one(pattern, flags):
    text = "a=1 b=22\nstep 3 x\nstep 44" if isinstance(pattern, str) else b"a\x00\x00b"
    later, now = compile_later(pattern, flags), re.compile(pattern, flags)
    for method, args in (("search", (text,)), ("match", (text,)), ("fullmatch", (text,)), ("findall", (text,)),
                         ("split", (text,)), ("sub", (text[:1], text)), ("subn", (text[:1], text))):
        got, want = getattr(later, method)(*args), getattr(now, method)(*args)
        if isinstance(want, re.Match):
            assert (got.span(), got.groups()) == (want.span(), want.groups())
        else:
            assert got == want, method
    assert [m.span() for m in later.finditer(text)] == [m.span() for m in now.finditer(text)]
    assert (later.pattern, later.flags, later.groups, later.groupindex) == (now.pattern, now.flags, now.groups,
                                                                            now.groupindex)


def test_it_compiles_on_first_use_not_before():
    later = compile_later("(unclosed")  # re.compile would raise here
    with pytest.raises(re.error):
        later.search("x")


# Records each pattern compiled by the module-level code of a dfdoctor module outside the agent (which keeps
# re.compile: standard library only), then imports what `check`, `launch` and `status` import.
_COUNT = r"""
import re, sys
compiled = []
real = re._compile
def counting(pattern, flags):
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.endswith(("re/__init__.py", "lazy_re.py")):
        f = f.f_back
    name = f.f_globals.get("__name__", "") if f is not None else ""
    if f is not None and f.f_code.co_name == "<module>" and name.startswith("dfdoctor.") \
            and not name.startswith("dfdoctor.agent"):
        compiled.append(f"{name}: {pattern!r}"[:120])
    return real(pattern, flags)
re._compile = counting
import dfdoctor.cli.main, dfdoctor.cli.launch, dfdoctor.diagnose.verdict, dfdoctor.render.html
print("\n".join(compiled))
"""


def test_importing_the_commands_compiles_no_pattern_of_dfdoctors_own():
    out = subprocess.run([sys.executable, "-c", _COUNT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", out.stdout


def _later_patterns(value, depth=0):
    if isinstance(value, LaterPattern):
        yield value
    elif depth < 4 and isinstance(value, (tuple, list, set, frozenset)):
        for v in value:
            yield from _later_patterns(v, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for v in value.values():
            yield from _later_patterns(v, depth + 1)
    elif depth == 0 and isinstance(value, type):
        for v in vars(value).values():
            yield from _later_patterns(v, depth + 1)


def test_every_later_pattern_of_dfdoctor_compiles():
    names = [n for n in import_graph.module_files()
             if not n.startswith(("dfdoctor.checks.probes", "dfdoctor.trainer", "dfdoctor.agent"))
             and not n.endswith("__main__")]
    seen = {id(p): p for n in names for v in vars(importlib.import_module(n)).values() for p in _later_patterns(v)}
    for p in seen.values():
        p.search("")  # compiles it: re.error for a bad one
    assert len(seen) > 100
