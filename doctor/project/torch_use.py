"""Whether the launched code imports torch when its module level runs, read with ast (never imported or run).

imports.smoke imports what the job's module level imports; where that is torch, the probe server imports it
once before the probe's fork (and may start on it before the probe asks: `probe_server`). A reading, so it only
decides where a cost is paid, never a verdict: an import it misses (torch pulled in by another library) is paid in
the probe's own process, an import it sees in dead code costs a CPU-second of the server's.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Optional

from dfdoctor.project.source import Module

RUNNER_IMPORTS = {"torchrun": "torch.distributed.run"}  # what the runner imports before the job (imports.smoke)
_FOLLOW_DEPTH = 2  # the script, the project's modules it imports, and theirs (as project.read follows them)


def imports_torch(spec, cwd: Path) -> bool:
    """Whether the module level of the launch's code (its script or `-c` code, and the project's own modules
    they import) imports torch or a module of it."""
    if RUNNER_IMPORTS.get(spec.runner, "").split(".")[0] == "torch":
        return True
    base = Path(spec.cwd or cwd)
    first = _first(spec, base)
    if first is None:
        return False
    roots = [base] + ([first.path.parent] if first.path != Path("-c") else [])
    seen, level = [first.path], [first]
    for _ in range(_FOLLOW_DEPTH + 1):
        names = [n for m in level for n in module_level_imports(m.tree)]
        if any(n.split(".")[0] == "torch" for n in names):
            return True
        found = [p for n in names for p in _local_file(n, roots) if p not in seen]
        seen += found
        level = [Module.read(p, Path("/")) for p in dict.fromkeys(found)]
    return False


def module_level_imports(tree: Optional[ast.AST]) -> Iterator[str]:
    """The absolute module names a module's import statements name, outside functions and lambdas (which its
    import does not run)."""
    stack = list(tree.body) if isinstance(tree, ast.Module) else []
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
        stack.extend(ast.iter_child_nodes(node))


def _first(spec, base: Path) -> Optional[Module]:
    if spec.code is not None:
        try:
            return Module(Path("-c"), "-c", spec.code, ast.parse(spec.code))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    if spec.script is not None:
        path = spec.script if Path(spec.script).is_absolute() else base / spec.script
        return Module.read(Path(path), Path("/")) if Path(path).is_file() else None
    if spec.module:
        for cand in _local_file(spec.module, [base]):
            return Module.read(cand, Path("/"))
    return None


def _local_file(name: str, roots: list[Path]) -> list[Path]:
    """The project's file a module name is (`data`, `mingpt.model`), under the roots; installed ones are not."""
    parts = name.split(".")
    return [c for r in roots for c in (r.joinpath(*parts).with_suffix(".py"), r.joinpath(*parts, "__init__.py"))
            if c.is_file()]
