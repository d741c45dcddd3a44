"""torchrun.record: will torchrun be able to say why a rank failed?

Without `@record` on the entry point, torchrun's failure report says `error_file: <N/A>` and "To enable
traceback see ...": the rank's own exception is only in the interleaved output. This check reads the entry
script (a static reading, so it can only warn) for `record` from torch.distributed.elastic.multiprocessing.errors
applied to a function: as a decorator, or called on one (`record(main)()`).

Before that: a script that never uses torch.distributed (pytorch/examples' gat under `torchrun
--nproc_per_node=2`) is not made distributed by torchrun: each process runs the whole job on its own. Where
neither the script nor the project's modules it imports name anything distributed, that is the warning, not @record.
"""

from __future__ import annotations

import ast
import shlex
from typing import Iterator, Optional

from dfdoctor import Result, check, ok, skip, warn
from dfdoctor import project
from dfdoctor.launchline.commandline import spec_for
from dfdoctor.lazy_re import compile_later

RECORD_MODULE = "torch.distributed.elastic.multiprocessing.errors"
# What a script that takes part in a torchrun/accelerate group names somewhere: torch.distributed and its
# environment, or a framework that forms the group itself (accelerate, Lightning, HF Trainer, DeepSpeed, Fabric).
_DISTRIBUTED = compile_later(r"torch\.distributed|init_process_group|DistributedDataParallel|\bDDP\b|LOCAL_RANK|"
                             r"\bRANK\b|WORLD_SIZE|accelerate|lightning|deepspeed|\bTrainer\b|fabric|horovod|"
                             r"torch_xla|dist\.")
_NPROC = compile_later(r"--nproc[-_]per[-_]node[= ](\S+)|--num[-_]processes[= ](\S+)")
FIX = ("Decorate the entry point: `from torch.distributed.elastic.multiprocessing.errors import record`, then "
       "`@record` on the function the `if __name__ == \"__main__\":` block calls (e.g. `main`). torchrun then "
       "keeps each failed rank's traceback in an error file and prints it under \"Root Cause\".")


@check("torchrun.record", title="A torchrun entry point records its ranks' errors (@record)", phases=("pre",),
       timeout=10, gates=False)  # a static reading: it gives no cause, so never stops a launch
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
    alone = _not_distributed(ctx, spec)
    if alone:
        yield alone
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


def _not_distributed(ctx, spec) -> Optional[Result]:
    """A warning when more than one process is asked for and neither the script nor the project's modules it
    imports name anything distributed (a static reading); None otherwise."""
    words = " ".join(ctx.command or [])
    m = _NPROC.search(words)
    count = (m.group(1) or m.group(2)) if m else None
    if count in ("1", None) and spec.runner == "torchrun":
        return None  # one process (torchrun's default): nothing runs twice
    try:
        proj = project.read(list(ctx.command or []), ctx.cwd, script=str(spec.script))
    except (OSError, RecursionError, ValueError):
        return None
    if not proj.files or any(_DISTRIBUTED.search(m.text) for m in proj.files):
        return None
    n = count if count and count.isdigit() else "N"
    readme = next((r for r in proj.runs() if r.words and r.words[0].startswith("python")), None)
    alone = "python " + shlex.join([proj.short(spec.script), *spec.script_args])
    return warn(f"{spec.script.name} never uses torch.distributed: {spec.runner} starts {n} copies of it, each running "
                "the whole job on its own (the same training done {n} times over)".replace("{n}", n),
                fix=f"Run it as one process: `{alone}`" + (f" (as {readme.where} runs it, with python)" if readme else "")
                + "; or make it "
                "distributed (init_process_group, DistributedSampler, DDP) before launching it with "
                f"{spec.runner} (not tried).",
                evidence=(f"read: {', '.join(m.rel for m in proj.files)}; none names torch.distributed, "
                          "init_process_group, DDP, RANK/LOCAL_RANK/WORLD_SIZE or a framework that forms the group "
                          "(a static reading)",), data={"script": str(spec.script)})


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
