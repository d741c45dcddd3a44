"""Reading the project's Python files: parsed once, never imported or run."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dfdoctor.safefile import read_head_text

_LIMIT = 1 << 20  # a source file larger than this is not a training script worth parsing


@dataclass(frozen=True)
class Module:
    """One source file: its path, its path relative to the folder it is shown against, its text and its tree."""

    path: Path
    rel: str
    text: str
    tree: Optional[ast.Module]

    @classmethod
    def read(cls, path: Path, base: Path) -> "Module":
        """Read and parse `path`; an unreadable or broken file has no tree."""
        raw = read_head_text(path, _LIMIT) or ""  # never the whole of a file of unknown size
        try:
            tree = ast.parse(raw) if raw else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # deep nesting overflows the parser
            tree = None
        rel = str(path) if base == Path("/") else str(path.relative_to(base)) if path.is_relative_to(base) \
            else str(path)
        return cls(path, rel, raw, tree)


def tree_of(path: "str | Path") -> Optional[ast.Module]:
    """The parsed tree of one source file a job's stack or traceback names: read bounded, as every file dfdoctor
    finds itself; None when it is unreadable, too deep for the parser or not Python."""
    return Module.read(Path(path), Path("/")).tree


def call_name(node: ast.Call) -> str:
    """The dotted name of what is called: 'parser.add_argument', 'torch.load', 'open'."""
    parts = []
    f = node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    elif isinstance(f, ast.Call):
        parts.append(call_name(f) + "()")
    return ".".join(reversed(parts))


def const(node: Optional[ast.AST]) -> object:
    """The value of a literal node (strings, numbers, booleans, None), else None."""
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def local_imports(module: Module, roots: list[Path]) -> list[Path]:
    """The project's own files that `module` imports (`import data`, `from mingpt.model import GPT`), found under
    `roots` (the script's folder, the job's folder, the project's root); installed packages are not followed."""
    found: list[Path] = []
    for node in ast.walk(module.tree) if module.tree is not None else ():
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            for root in roots:
                parts = name.split(".")
                for cand in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
                    if cand.is_file() and cand not in found:
                        found.append(cand)
    return found
