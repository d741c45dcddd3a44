"""The methods of dfdoctor's dataclasses compiled ahead of time (dfdoctor/dataclass_code.py): the console script's
process compiles none of the texts `make test` kept, and every method it makes is the method a process without the
kept code compiles afresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Imports every dfdoctor module (as `keep` does) and prints, for each dataclass method made, a fingerprint of its
# code, and how many dataclass texts the process compiled (the `compile` audit event: exec of a code object raises
# none). AS_CONSOLE: run as the console script is (argv[0] `dfdoctor`), the process that takes the kept code.
_LOOK = """
import importlib, json, pkgutil, sys
compiled = []
sys.addaudithook(lambda event, args: event == "compile" and isinstance(args[0], (str, bytes))
                 and "def __create_fn__(" in (args[0] if isinstance(args[0], str) else args[0].decode("utf-8", "replace"))
                 and compiled.append(1))
if sys.argv[1] == "AS_CONSOLE":
    sys.argv[0] = "dfdoctor"
import dataclasses, dfdoctor
for info in pkgutil.walk_packages(dfdoctor.__path__, "dfdoctor."):
    if not info.name.startswith(("dfdoctor.trainer", "dfdoctor.checks.probes")) and not info.name.endswith("__main__"):
        try:
            importlib.import_module(info.name)
        except Exception:
            pass
def code_of(c):
    return [c.co_name, c.co_qualname, c.co_filename, c.co_firstlineno, c.co_flags, c.co_argcount,
            c.co_kwonlyargcount, c.co_code.hex(), c.co_linetable.hex(), c.co_exceptiontable.hex(), list(c.co_names),
            list(c.co_varnames), list(c.co_freevars), list(c.co_cellvars),
            [code_of(k) if hasattr(k, "co_code") else repr(k) for k in c.co_consts]]
made = {}
for name, module in sorted(sys.modules.items()):
    if name == "dfdoctor" or name.startswith("dfdoctor."):
        for cls in vars(module).values():
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == name:
                for attr in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
                    fn = cls.__dict__.get(attr)
                    if hasattr(fn, "__code__") and fn.__code__.co_filename == "<string>":
                        made[f"{cls.__module__}.{cls.__qualname__}.{attr}"] = [code_of(fn.__code__),
                                                                                repr(fn.__annotations__)]
print(json.dumps({"compiled": len(compiled), "made": made}))
"""


def _look(as_console: bool) -> dict:
    p = subprocess.run([sys.executable, "-c", _LOOK, "AS_CONSOLE" if as_console else "PLAIN"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_console_script_takes_the_kept_code_and_its_methods_are_the_methods_compiled_afresh():
    from dfdoctor import kept_code, dataclass_code
    if not os.path.exists(dataclass_code.path()):
        kept_code.keep()  # what `make test` runs
    kept, afresh = _look(as_console=True), _look(as_console=False)
    assert afresh["compiled"] > 100 and len(afresh["made"]) > 100, afresh["compiled"]  # dfdoctor has ~500
    assert kept["compiled"] == 0
    assert kept["made"] == afresh["made"]
