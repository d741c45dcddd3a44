"""Regular expressions compiled when first used, not when their module is imported.

Compiling a pattern is Python code (re._parser, re._compiler): the ~100 module-level patterns of the modules a
`dfdoctor status` or `launch` imports cost 12 ms of its CPU, and all but ~15 of them were never used by that
process (a rule's pattern is read only when its kind of failure is in the output; issue 45). `compile_later`
gives an object that is used as the compiled pattern is (`.search`, `.sub`, `.pattern`, ...) and compiles it on the
first such use. It is not a `re.Pattern`: it is never handed to `re.search(pattern, ...)`, and `match.re is` it is
false (compare `match.re.pattern` with its `.pattern`, as diagnose/stackclass.py does). The agent's modules
(dfdoctor.agent) and the files shipped as source (rehearse/sentinel.py, checks/probes/) keep `re.compile`: they
run with the standard library alone.
"""

from __future__ import annotations

import re
from typing import Any


class LaterPattern:
    """`re.compile(pattern, flags)`, compiled on its first use. Each attribute read once is kept in the instance's
    own dict: from then on it is found there, as fast as on the compiled pattern."""

    def __init__(self, pattern: Any, flags: int = 0) -> None:
        self._later = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for a name not yet in the instance's dict
        if name.startswith("__"):  # copy, pickle and the like ask for special methods this object does not have
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self.__dict__["_compiled"] = re.compile(*self._later)
        value = getattr(compiled, name)
        self.__dict__[name] = value
        return value


def compile_later(pattern: Any, flags: int = 0) -> LaterPattern:
    """What `re.compile(pattern, flags)` gives, compiled when first used (see the module's docstring)."""
    return LaterPattern(pattern, flags)
