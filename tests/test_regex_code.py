"""Regular expressions' code compiled ahead of time (dfdoctor/regex_code.py): the console script's process parses
none of the patterns `make test` kept, and each pattern it gets is the pattern re compiles afresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Run as the console script is (argv[0] `dfdoctor`): re's own compile is taken before dfdoctor is imported, then
# every kept pattern is compiled by what dfdoctor left in its place and by re's own, and compared (_sre's patterns
# compare equal when their pattern, flags and code are), while re._parser.parse counts what was parsed.
_LOOK = """
import json, marshal, re, sys
from re import _compiler, _parser
afresh = _compiler.compile
sys.argv[0] = "dfdoctor"
import dfdoctor
from dfdoctor import regex_code
with open(regex_code.path(), "rb") as f:
    keys = [k for k in marshal.loads(f.read()) if k != ""]
parse, parsed = _parser.parse, []
_parser.parse = lambda *a, **k: parsed.append(1) or parse(*a, **k)
kept = [_compiler.compile(p, flags) for p, flags in keys]
_parser.parse = parse
differ = [repr(p) for (p, flags), k in zip(keys, kept)
          if (k, k.groups, k.groupindex) != (lambda a: (a, a.groups, a.groupindex))(afresh(p, flags))]
print(json.dumps({"kept": len(keys), "parsed": len(parsed), "differ": differ}))
"""


def test_the_console_script_takes_the_kept_code_and_its_patterns_are_the_patterns_compiled_afresh():
    from dfdoctor import kept_code, regex_code
    if not os.path.exists(regex_code.path()):
        kept_code.keep()  # what `make test` runs
    p = subprocess.run([sys.executable, "-c", _LOOK], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["kept"] > 200, got["kept"]  # the standard library's, click's, Jinja2's and dfdoctor's own
    assert got["parsed"] == 0
    assert got["differ"] == []
