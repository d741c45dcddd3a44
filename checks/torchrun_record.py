"""torchrun.record: will torchrun be able to say why a rank failed?

Without `@record` on the entry point, torchrun's failure report says `error_file: <N/A>` and "To enable
traceback see ...": the rank's own exception is only in the interleaved output. This check reads the entry
script (a static reading, so it can only warn) for `record` from torch.distributed.elastic.multiprocessing.errors
applied to a function: as a decorator, or called on one (`record(main)()`).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from dfdoctor import Result, check, ok, skip, warn
from dfdoctor.launchline.commandline import spec_for

RECORD_MODULE = "torch.distributed.elastic.multiprocessing.errors"
FIX = ("Decorate the entry point: `from torch.distributed.elastic.multiprocessing.errors import record`, then "
       "`@record` on the function the `if __name__ == \"__main__\":` block calls (e.g. `main`). torchrun then "
       "keeps each failed rank's traceback in an error file and prints it under \"Root Cause\".")


@check("torchrun.record", title="A torchrun entry point records its ranks' errors (@record)", phases=("pre",),
       timeout=10)
def torchrun_record(ctx) -> Iterator[Result]:
    """Read the script torchrun or accelerate starts for `@record` on its entry point."""
    if not ctx.command and not ctx.launcher:
        yield skip("no command given, so there is no torchrun entry point to read")
        return
    spec = spec_for(ctx)
    if spec.runner not in ("torchrun", "accelerate"):
        yield skip("the launch does not go through torchrun or accelerate")
        return
    if not ctx.target.runs_here:
        yield skip("the entry script lives on the target; it was not read from here")
        return
    if spec.script is None:
        what = f"module {spec.module}" if spec.module else "its entry point"
        yield skip(f"the launch runs {what}, not a script file; it was not read for @record")
        return
    try:
        tree = ast.parse(spec.script.read_text(encoding="utf-8", errors="replace"), str(spec.script))
    except (OSError, SyntaxError, ValueError) as e:
        yield skip(f"{spec.script} could not be read or parsed ({type(e).__name__}); imports.smoke says more")
        return
    found = recorded(tree)
    if found:
        yield ok(f"{spec.script.name} applies @record to {found}", data={"script": str(spec.script)})
        return
    yield warn(f"{spec.script.name} is started by {spec.runner} but its entry point has no @record: a failed rank "
               "is reported as `error_file: <N/A>` without its traceback", fix=FIX,
               evidence=(f"script: {spec.script}", f"no use of record from {RECORD_MODULE} was found in it "
                         "(a static reading: a wrapper defined elsewhere is not followed)"),
               data={"script": str(spec.script)})


def recorded(tree: ast.Module) -> Optional[str]:
    """The function `record` is applied to (a name for the evidence), or None."""
    names = _record_names(tree)
    if not names:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_is_record(d, names) for d in node.decorator_list):
                return node.name
        if isinstance(node, ast.Call) and _is_record(node.func, names) and node.args:
            arg = node.args[0]
            return arg.id if isinstance(arg, ast.Name) else "a function"
    return None


def _record_names(tree: ast.Module) -> set[str]:
    """How `record` can be spelled in this file: an imported name, or `<alias>.record` of its module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == RECORD_MODULE:
            names |= {a.asname or a.name for a in node.names if a.name == "record"}
        elif isinstance(node, ast.ImportFrom) and node.module == RECORD_MODULE.rsplit(".", 1)[0]:
            names |= {f"{a.asname or a.name}.record" for a in node.names if a.name == "errors"}
        elif isinstance(node, ast.Import):
            names |= {f"{a.asname}.record" if a.asname else f"{RECORD_MODULE}.record"
                      for a in node.names if a.name == RECORD_MODULE}
    return names


def _is_record(node: ast.AST, names: set[str]) -> bool:
    """`record`, `errors.record` or `record(...)` as spelled in this file."""
    if isinstance(node, ast.Call):
        node = node.func
    return _dotted(node) in names


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain, else ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""
