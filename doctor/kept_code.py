"""Writes the code dfdoctor's console script takes instead of compiling it again (`make test` runs `keep`, as it
runs compileall): the methods of its dataclasses (dataclass_code) and its regular expressions (regex_code), noted
in one fresh interpreter while every dfdoctor module is imported, the HTML page's templates are loaded (Jinja2
compiles its lexer's patterns then) and every later-compiled pattern (dfdoctor.lazy_re) is compiled. Fresh: one
that has imported dfdoctor made some of its classes and compiled some of its patterns already.
"""

import marshal
import os
import sys

# That interpreter loads the two noting modules by their files (not the package, whose __init__ makes classes),
# has each note what it compiles from then on, imports each dfdoctor module (not the trainer: torch; not the
# probes: scripts of the training interpreter, standard library only), and writes what each noted.
_RECORD = """
import gc, importlib, importlib.util, pkgutil, sys

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

writer, *noting = [load(name, path) for name, path in zip(("kept_code", "dataclass_code", "regex_code"), sys.argv[1:])]
kept = [module.note() for module in noting]
import dfdoctor
for info in pkgutil.walk_packages(dfdoctor.__path__, "dfdoctor."):
    if not info.name.startswith(("dfdoctor.trainer", "dfdoctor.checks.probes")) and not info.name.endswith("__main__"):
        try:
            importlib.import_module(info.name)
        except Exception:  # a module that cannot be imported here makes no class, compiles no pattern here either
            pass
from dfdoctor.render import html
html.prepare()
from dfdoctor.lazy_re import LaterPattern
for later in [o for o in gc.get_objects() if isinstance(o, LaterPattern)]:
    later.pattern  # compiles it
for module, notes in zip(noting, kept):
    writer.write(notes, module.path())
"""


def keep() -> None:
    """Write both files of kept code for this Python."""
    import subprocess
    here = os.path.dirname(os.path.realpath(__file__))
    files = [os.path.join(here, name) for name in ("kept_code.py", "dataclass_code.py", "regex_code.py")]
    subprocess.run([sys.executable, "-c", _RECORD, *files], check=True)


def write(kept: dict, out: str) -> None:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    part = f"{out}.{os.getpid()}.part"
    with open(part, "wb") as f:
        marshal.dump(kept, f)
    os.replace(part, out)  # a reader sees the whole file or none
