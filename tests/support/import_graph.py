"""The import graph of dfdoctor's own modules, read from the source with `ast` (nothing is imported).

`python tests/support/import_graph.py` prints the largest modules and every import cycle; the suite asserts
there is none (tests/test_structure.py). Two graphs: `top_level` holds the imports a module runs when it is
imported (module level, including inside `try`/`if`), `everything` adds the ones inside functions, which are
where a cycle hides when it is dodged instead of broken. `floor_graph` folds each subpackage into one node (a
floor: `dfdoctor.launch`, `dfdoctor.diagnose`, `dfdoctor.run`); a module of the top package is a floor of its own.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# setup.cfg's package_dir: the import name of each folder.
ROOTS = {"dfdoctor": "doctor", "dfdoctor.checks": "checks", "dfdoctor.trainer": "trainer"}


def _roots(repo: Path) -> dict[str, str]:
    """Import name -> folder; a checkout from before the one import name installed each folder as itself."""
    if "package_dir" in (repo / "setup.cfg").read_text():
        return ROOTS
    return {folder: folder for folder in ROOTS.values()}


def module_files(repo: Path = REPO) -> dict[str, Path]:
    """Every dfdoctor module, by its import name."""
    found: dict[str, Path] = {}
    for prefix, folder in _roots(repo).items():
        root = repo / folder
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([prefix, *parts])
            found[name] = path
    return found


def _resolve(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _top_level_nodes(tree: ast.Module):
    """The statements that run at import: module level, into `if`/`try`/`with` blocks, not into defs."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.ClassDef):
            stack.extend(node.body)  # a class body runs at import
            continue
        stack.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt) or isinstance(n, ast.excepthandler))


def tree_of(path: Path) -> ast.Module:
    """The parsed source of a file, parsed again only when the file changed (test_structure's tests read the same
    graph a dozen times: 1.3 CPU-s a reading, 15 of the file's 18 CPU-s before)."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _parsed(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imports_of(name: str, path: Path, modules: dict[str, Path], top_only: bool) -> set[str]:
    """The dfdoctor modules `name` imports (the module itself for `from pkg import module`)."""
    tree = tree_of(path)
    nodes = _top_level_nodes(tree) if top_only else ast.walk(tree)
    out: set[str] = set()
    for node in nodes:
        out |= _imported(node, name, path, modules)
    return out


def graph(top_only: bool, repo: Path = REPO) -> dict[str, set[str]]:
    modules = module_files(repo)
    stamp = tuple((name, path.stat().st_mtime_ns, path.stat().st_size) for name, path in modules.items())
    return {name: set(deps) for name, deps in _graph(top_only, repo, stamp).items()}  # the caller's own copy


@functools.lru_cache(maxsize=None)
def _graph(top_only: bool, repo: Path, stamp: tuple) -> dict[str, frozenset[str]]:
    """The graph of the files as `stamp` saw them (names, times and sizes): read again once one changed."""
    modules = module_files(repo)
    return {name: frozenset(imports_of(name, path, modules, top_only)) for name, path in modules.items()}


def floor(name: str, packages: set[str]) -> str:
    """The floor of a module: the subpackage right under a root that holds it, else the module itself."""
    parts = name.split(".")
    for n in (3, 2):  # dfdoctor.checks.probes under dfdoctor.checks; dfdoctor.launch under dfdoctor
        outer, inner = ".".join(parts[:n - 1]), ".".join(parts[:n])
        if len(parts) >= n and inner in packages and outer in (set(ROOTS) | {"dfdoctor"}):
            return inner
    return name


def packages(repo: Path = REPO) -> set[str]:
    """The import names of dfdoctor's packages (folders with an __init__.py)."""
    return {n for n, p in module_files(repo).items() if p.name == "__init__.py"}


def floor_graph(g: dict[str, set[str]], repo: Path = REPO) -> dict[str, set[str]]:
    """`g` with each subpackage folded into one node; an import inside one floor is no edge."""
    pk = packages(repo)
    out: dict[str, set[str]] = {}
    for a, bs in g.items():
        fa = floor(a, pk)
        out.setdefault(fa, set())
        for b in bs:
            if floor(b, pk) != fa:
                out[fa].add(floor(b, pk))
    return out


def inner_imports(repo: Path = REPO) -> list[tuple[str, int, str]]:
    """(file, line, module) of every import of our own modules that runs inside a function."""
    modules = module_files(repo)
    out = []
    for name, path in modules.items():
        tree = tree_of(path)
        at_import = {id(n) for n in _top_level_nodes(tree)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in at_import:
                for dep in sorted(_imported(node, name, path, modules)):
                    out.append((str(path.relative_to(repo)), node.lineno, dep))
    return sorted(out)


def _imported(node: ast.AST, name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The dfdoctor modules one import statement names (the module itself for `from pkg import module`)."""
    out: set[str] = set()
    if isinstance(node, ast.Import):
        out.update(a.name for a in node.names if a.name in modules)
    elif isinstance(node, ast.ImportFrom):
        base = _resolve(node, name, path.name == "__init__.py")
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if full in modules:
                out.add(full)
            elif base in modules:
                out.add(base)
    out.discard(name)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def main(argv: list[str]) -> int:
    """Print the figures for the checkout at argv[0] (default: this one)."""
    repo = Path(argv[0]).resolve() if argv else REPO
    modules = module_files(repo)
    sizes = sorted(((len(p.read_text().splitlines()), str(p.relative_to(repo))) for p in modules.values()),
                   reverse=True)
    print(f"{len(modules)} modules, {sum(n for n, _ in sizes)} lines; largest:")
    for n, p in sizes[:10]:
        print(f"  {n:5d} {p}")
    for label, top_only in (("import-time", True), ("including imports inside functions", False)):
        g = graph(top_only, repo)
        fg = floor_graph(g, repo)
        found, floor_cycles = cycles(g), cycles(fg)
        print(f"{label}: {sum(map(len, g.values()))} edges between modules, {len(found)} cycles; "
              f"{len(fg)} floors, {sum(map(len, fg.values()))} edges between floors, {len(floor_cycles)} cycles")
        for comp in found + floor_cycles:
            print("  " + " <-> ".join(comp))
    inner = inner_imports(repo)
    print(f"imports of our modules inside functions: {len(inner)} in {len({f for f, _, _ in inner})} files")
    for f, line, dep in inner:
        print(f"  {f}:{line} {dep}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
