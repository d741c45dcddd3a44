"""Whether the launched code imports torch when its module level runs, read with ast (never imported or run).

imports.smoke imports what the job's module level imports; where that is torch, the probe server imports it once
before the probe's fork (`imports_torch`, from the launch as imports.smoke follows it), and may start on it as it
starts, before any probe asks (`command_imports_torch`, from the command's words alone: it is read before the
checks' modules are, and must cost no imports of theirs). A reading, so it only decides where a cost is paid,
never a verdict: an import it misses (torch pulled in by another library) is paid in the probe's own process, an
import it sees in dead code costs a CPU-second of the server's.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Iterator, Optional, Sequence

from dfdoctor.safefile import read_head_text

RUNNER_IMPORTS = {"torchrun": "torch.distributed.run"}  # what the runner imports before the job (imports.smoke)
_FOLLOW_DEPTH = 2  # the script, the project's modules it imports, and theirs (as project.read follows them)
_LIMIT = 1 << 20  # a source file larger than this is not read (as doctor/project/source.py)


def imports_torch(spec, cwd: Path) -> bool:
    """Whether the module level of the launch's code (its script, `-c` code or `-m` module, and the project's own
    modules they import) imports torch or a module of it."""
    if RUNNER_IMPORTS.get(spec.runner, "").split(".")[0] == "torch":
        return True
    base = Path(spec.cwd or cwd)
    if spec.code is not None:
        return _reads_torch(_tree(spec.code), None, base)
    if spec.script is not None:
        return _file_reads_torch(Path(base, spec.script), base)
    return bool(spec.module) and any(_file_reads_torch(p, base) for p in _local_file(spec.module, [base])[:1])


def command_imports_torch(argv: Sequence[str], cwd: Path) -> bool:
    """The same question of a plain command (`python train.py`, `python -c CODE`, `torchrun ... train.py`), read
    from its words: False where it takes more than that to say (a launcher, `-m`)."""
    words = [str(w) for w in argv]
    if words and os.path.basename(words[0]) in RUNNER_IMPORTS:
        return True
    for i, word in enumerate(words[1:], 1):  # the first of `-c CODE` and a script says which it runs
        if word == "-c" and i + 1 < len(words):  # the interpreter's own option (a script's `-c x.yaml` comes later)
            return _reads_torch(_tree(words[i + 1]), None, Path(cwd))
        if word.endswith(".py"):
            return _file_reads_torch(Path(cwd, word), Path(cwd))
    return False


def _file_reads_torch(path: Path, base: Path) -> bool:
    """`_reads_torch` of a source file; False for one that cannot be read (imports.smoke says why)."""
    try:
        return path.is_file() and _reads_torch(_tree(read_head_text(path, _LIMIT)), path, base)
    except (OSError, ValueError):
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


def _reads_torch(tree: Optional[ast.AST], path: Optional[Path], base: Path) -> bool:
    """Whether this module, or a project module it imports (followed _FOLLOW_DEPTH deep), imports torch."""
    roots = [base] + ([path.parent] if path is not None else [])
    seen, level = [path], [tree]
    for _ in range(_FOLLOW_DEPTH + 1):
        names = [n for t in level for n in module_level_imports(t)]
        if any(n.split(".")[0] == "torch" for n in names):
            return True
        found = [p for p in dict.fromkeys(p for n in names for p in _local_file(n, roots)) if p not in seen]
        seen += found
        level = [_tree(read_head_text(p, _LIMIT)) for p in found]
    return False


def _tree(text: Optional[str]) -> Optional[ast.Module]:
    try:
        return ast.parse(text) if text else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _local_file(name: str, roots: list[Path]) -> list[Path]:
    """The project's files a module name is (`data`, `mingpt.model`) under the roots; installed ones are not."""
    parts = name.split(".")
    return [c for r in roots for c in (r.joinpath(*parts).with_suffix(".py"), r.joinpath(*parts, "__init__.py"))
            if c.is_file()]
