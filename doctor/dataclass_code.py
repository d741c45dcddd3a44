"""The code of dfdoctor's dataclasses' methods, compiled ahead of time.

`@dataclass` writes the source of each class's methods (__init__, __repr__, __eq__, a frozen class's __setattr__ and
__delattr__, __hash__) and compiles it as the class is made: most of the cost of a dataclass, and a launch makes 50
of them (about 0.1 G of its 1.1 G instructions, callgrind). `make test` keeps the code compiled from every text
dfdoctor's own classes make (`kept_code.keep`), as compileall keeps Python's, in one file of __pycache__ named for
this Python's bytecode; the console script's process (`use`, called by dfdoctor/__init__.py before its first
dataclass) then takes the code of a text from that file instead of compiling the same text again. The key is the
whole text: a class changed since, a text not kept, another Python or no file at all compile as before. The code is
what compiling the text gives (`compile(text, "<string>", "exec")`, no `__future__` flags, as dataclasses' own
`exec` has none), so every method is the same. Only the console script's process is changed: another process that
imports dfdoctor (a job's `dfdoctor.guard`) keeps its dataclasses module as it was.

This module has no `from __future__ import annotations`: `exec` of a text compiles it with the calling module's
future flags, and a text not kept is compiled here as dataclasses compiles it.
"""

import marshal
import os
import sys

_FOLDER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "__pycache__")


def path() -> str:
    """The file of kept code for this Python's bytecode (its magic number: code of one is not code of another)."""
    from importlib.util import MAGIC_NUMBER
    return os.path.join(_FOLDER, f"dataclass-code.{sys.implementation.cache_tag}.{MAGIC_NUMBER.hex()}.marshal")


def use() -> None:
    """Let dataclasses take kept code for the texts it compiles (nothing changes where no file can be read)."""
    import dataclasses
    try:
        with open(path(), "rb") as f:
            kept = marshal.loads(f.read())  # marshal.load(f) reads the file a few bytes at a time: 5 times the cost
    except Exception:  # none kept, unreadable or torn: every text compiles as before
        return
    if not isinstance(kept, dict):
        return

    def kept_exec(source, globals=None, locals=None):
        code = kept.get(source) if type(source) is str else None
        if code is not None:
            try:
                code = marshal.loads(code)
            except Exception:
                code = None
            code = code if type(code) is type(kept_exec.__code__) else None  # a torn entry: compiled as before
        return exec(source if code is None else code, globals, locals)

    dataclasses.exec = kept_exec  # its module's global: found before the builtin by its own `exec(txt, ...)`


def note() -> dict:
    """Have dataclasses note the code of each text it compiles from now on: {text: marshalled code}."""
    import dataclasses
    kept = {}

    def noting_exec(source, globals=None, locals=None):
        # each text's code is kept marshalled and read only when its class is made: a launch makes half of the
        # ~520 texts, and unmarshalling all of their code at start-up took 12 M instructions (the file: 2 M)
        if type(source) is str:
            kept[source] = marshal.dumps(compile(source, "<string>", "exec", dont_inherit=True))
        return exec(source, globals, locals)

    dataclasses.exec = noting_exec
    return kept
