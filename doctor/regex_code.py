"""Regular expressions' compiled code, kept ahead of time.

Compiling a pattern is Python code (re._parser parses it, re._compiler writes the code _sre runs): a launch compiles
~140 patterns (the standard library's, click's and Jinja2's as they are imported, dfdoctor's as its rules are read),
95 M of its 660 M instructions (callgrind). `make test` keeps what re._compiler hands _sre for every pattern
dfdoctor's modules and the libraries they import compile (`kept_code.keep`), in one file of __pycache__ named for
this Python's bytecode, with the Python and _sre versions it was made by; the console script's process (`use`,
called by dfdoctor/__init__.py) then gives _sre the kept code of a pattern and flags instead of parsing and
compiling it again. The key is the pattern's whole text and its flags: a pattern not kept, another Python or _sre,
or no file compile as before; a pattern whose parsing warned (a FutureWarning the user would see) is never kept.
Only the console script's process is changed, as with dataclass_code.
"""

import marshal
import os
import sys

_FOLDER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "__pycache__")


def path() -> str:
    """The file of kept code for this Python's bytecode."""
    from importlib.util import MAGIC_NUMBER
    return os.path.join(_FOLDER, f"regex-code.{sys.implementation.cache_tag}.{MAGIC_NUMBER.hex()}.marshal")


def _made_by() -> tuple:
    """What the kept code is valid for: this Python, and the format of _sre's code."""
    from re import _constants
    return (sys.version, _constants.MAGIC)


def use() -> None:
    """Let re take kept code for the patterns it compiles (nothing changes where no file can be read)."""
    try:
        import _sre
        from re import _compiler
        with open(path(), "rb") as f:
            kept = marshal.loads(f.read())  # marshal.load(f) reads the file a few bytes at a time
        if not isinstance(kept, dict) or kept.get("") != _made_by():
            return
    except Exception:  # none kept, unreadable, torn, or an re without these internals: compiled as before
        return
    compile = _compiler.compile

    def kept_compile(p, flags=0):
        args = kept.get((p, flags)) if type(p) in (str, bytes) and type(flags) is int else None
        if args is None:
            return compile(p, flags)
        return _sre.compile(p, *marshal.loads(args))

    _compiler.compile = kept_compile  # what re.compile, re.search, ... call for a pattern not in re's own cache


def note() -> dict:
    """Have re note what it hands _sre for each pattern it compiles from now on: {(pattern, flags): arguments},
    and {"": what they are valid for}."""
    import warnings
    from re import _compiler, _constants
    kept = {"": _made_by()}
    real_sre, compile = _compiler._sre, _compiler.compile
    asked = []

    class NotingSre:
        def __getattr__(self, name):
            return getattr(real_sre, name)

        def compile(self, pattern, *args):
            if asked and asked[-1] is not None:
                # the code's opcodes are int subclasses (re._constants), which marshal does not write; each
                # pattern's arguments are kept marshalled, read only when it is compiled (a launch compiles half of
                # them, and unmarshalling all their code at start-up was 6 M instructions, the file as it is 1 M)
                kept[asked[-1]] = marshal.dumps(tuple([int(c) for c in a] if isinstance(a, list) else a
                                                      for a in args))
            return real_sre.compile(pattern, *args)

    def noting_compile(p, flags=0):
        keyed = type(p) in (str, bytes) and type(flags) is int and not flags & _constants.SRE_FLAG_DEBUG
        asked.append((p, flags) if keyed else None)
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                compiled = compile(p, flags)
            if said and keyed:
                kept.pop((p, flags), None)  # it warns: compiled each time, as the warning must be said each time
        finally:
            asked.pop()
        for w in said:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return compiled

    _compiler._sre, _compiler.compile = NotingSre(), noting_compile
    return kept
