"""The static half of compile.race: read (never import) the launched code and say which threads run compiled
code and whether each applies the proven guard.

It follows the launched code's own modules (imports that resolve to files under the script's folder or the
launched package), and finds compiles written as `@torch.compile`, `torch.compile(model)` and
`model.compile()`, and thread entries started as `Thread(target=f)`, `executor.submit(f)`/`executor.map(f)`
on a thread pool, and `threading.Thread` subclasses (their `run`). A thread entry is guarded only by the
proven guard, `dfdoctor.guard.compile_guard`, applied unconditionally on its path: every call that runs
compiled code sits in a `with compile_guard(...)` block not under an `if`/`while`/`except`, or calls a function
decorated `@compile_guard`. Anything else (the config flag alone, a lock, the guard under a condition, the
guard imported but not on the path) is reported as seen, not proven. Names are matched by identifier, not by
type: what it cannot link (a target that is a lambda, a compiled model passed around) it says it could not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

MAX_FILES = 200
MAX_FILE_BYTES = 1_000_000
GUARD_NAME = "compile_guard"
FLAG = "force_non_lazy_backward_lowering"
OTHER_GUARD_WORDS = ("apply_compile_guard", "setup_thread", "step_context")
POOLS = ("ThreadPoolExecutor", "ThreadPool")
CONDITIONAL = (ast.If, ast.While, ast.IfExp, ast.ExceptHandler, ast.Match) if hasattr(ast, "Match") else \
    (ast.If, ast.While, ast.IfExp, ast.ExceptHandler)


@dataclass
class Scan:
    """What the launched code does with compiles, threads and guards, as `file:line what` strings."""

    files: int = 0
    compiles: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    threaded: list[str] = field(default_factory=list)  # thread entries that run compiled code
    proven: list[str] = field(default_factory=list)  # the proven guard on such an entry's path
    unguarded: list[str] = field(default_factory=list)  # entries that run compiled code without it
    seen: list[str] = field(default_factory=list)  # guard-like code that is not the proven guard on the path
    unlinked: bool = False  # compiles and threads, but no thread entry could be linked to compiled code

    @property
    def compiles_in_threads(self) -> bool:
        """The code compiles and starts threads (linked, or not linkable but both present)."""
        return bool(self.threaded) or self.unlinked

    @property
    def guarded(self) -> bool:
        """Every thread entry that runs compiled code applies the proven guard."""
        return bool(self.threaded) and not self.unguarded


def parse(path: Path) -> Optional[ast.AST]:
    """The AST of a Python file, or None when it is unreadable, too big or not Python."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return ast.parse(path.read_text(errors="replace"), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def own_modules(entry: Path, roots: Iterable[Path]) -> list[Path]:
    """The entry file and, transitively, every module it imports that is a file under one of `roots` (the
    script's folder, the launched package's root): the launched code's own modules, not installed ones."""
    roots = [r.resolve() for r in roots]
    todo, seen = [entry.resolve()], []
    while todo and len(seen) < MAX_FILES:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.append(path)
        tree = parse(path)
        for node in ast.walk(tree) if tree else ():
            for name in _imported_modules(node, path):
                todo += [f for f in _module_files(name, roots) if f not in seen]
    return seen


def _imported_modules(node: ast.AST, path: Path) -> list[str]:
    """Dotted module names an import statement may load (`from a import b` may load a.b); relative ones
    come back as absolute paths' dotted form relative to the file's folder, prefixed with '/'."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        mod = str(base / Path(*node.module.split("."))) if node.module else str(base)
        return ["/" + mod] + ["/" + str(Path(mod) / a.name) for a in node.names]
    return [node.module] + [f"{node.module}.{a.name}" for a in node.names] if node.module else []


def _module_files(name: str, roots: list[Path]) -> list[Path]:
    """The files a module name resolves to under the roots: the module, and its packages' __init__.py."""
    bases = [Path(name[1:])] if name.startswith("/") else [r / Path(*name.split(".")) for r in roots]
    out = []
    for base in bases:
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                out.append(cand.resolve())
        if not name.startswith("/"):
            parts = name.split(".")
            for i in range(1, len(parts)):
                init = base.parents[len(parts) - 1 - i] / "__init__.py"
                if init.is_file():
                    out.append(init.resolve())
    return out


def scan(files: list[Path]) -> Scan:
    """Read the files; link thread entries to compiled code; decide which apply the proven guard."""
    found = Scan()
    trees = [(p, t) for p in files if (t := parse(p)) is not None]
    found.files = len(trees)
    idx = _Index()
    for path, tree in trees:
        idx.read(path, tree, found)
    for name, where in idx.entries:
        fns = idx.functions.get(name, [])
        if not fns:
            if idx.lambda_entries.get((name, where)):
                found.seen.append(f"{where}: thread runs a lambda; not followed")
            continue
        if not any(idx.runs_compiled(f) for f, _ in fns):
            continue
        found.threaded.append(f"{where} thread runs {name}()")
        proven = all(idx.guarded(f) for f, _ in fns if idx.runs_compiled(f))
        if proven:
            found.proven += [w for f, _ in fns for w in idx.guard_sites(f)] or [f"{where} @{GUARD_NAME}"]
        else:
            found.unguarded.append(f"{name}() ({fns[0][1]}) runs compiled code with no proven guard on its path")
    found.unlinked = not found.threaded and bool(found.compiles and found.threads)
    found.seen += [s for s in idx.seen if s not in found.seen]
    found.proven = list(dict.fromkeys(found.proven))
    return found


class _Index:
    """Functions, compiled names, guard names and thread entries of all files, matched by identifier."""

    def __init__(self) -> None:
        self.functions: dict[str, list[tuple[ast.AST, str]]] = {}
        self.compiled: set[str] = set()
        self.guarded_names: set[str] = set()  # callables decorated or wrapped with compile_guard
        self.entries: list[tuple[str, str]] = []
        self.lambda_entries: dict[tuple[str, str], bool] = {}
        self.seen: list[str] = []
        self._runs: dict[int, bool] = {}
        self._guarded: dict[int, bool] = {}
        self.file_of: dict[int, str] = {}

    def read(self, path: Path, tree: ast.AST, found: Scan) -> None:
        """Index one file."""
        pools = any(_ident(n) in POOLS for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute)))
        parents = _parents(tree)
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append((node, where))
                self.file_of[id(node)] = path.name
                for dec in node.decorator_list:
                    if _is_torch_compile(dec.func if isinstance(dec, ast.Call) else dec):
                        self.compiled.add(node.name)
                        found.compiles.append(f"{where} @torch.compile")
                    if _ident(dec.func if isinstance(dec, ast.Call) else dec) == GUARD_NAME:
                        self.guarded_names.add(node.name)
            elif isinstance(node, ast.ClassDef) and any(_ident(b) == "Thread" for b in node.bases):
                self.entries.append(("run", where))
                found.threads.append(f"{where} class {node.name}(Thread)")
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                self._assigned(node, where, found)
            elif isinstance(node, ast.Call):
                self._call(node, where, found, pools, parents)
            elif isinstance(node, (ast.Attribute, ast.Name)) and _ident(node) == FLAG:
                cond = _condition(node, parents)
                self.seen.append(f"{where} {FLAG}" + (f" (under {cond})" if cond else "") +
                                 ": the flag alone is not a guard (seen, not proven)")

    def _assigned(self, node: ast.Assign, where: str, found: Scan) -> None:
        """`x = torch.compile(...)`, `self.m = torch.compile(...)`, `x = compile_guard(torch.compile(f))`."""
        call = node.value
        names = [_ident(t) for t in node.targets if _ident(t)]
        if _is_torch_compile(call.func):
            self.compiled.update(names)
        elif _ident(call.func) == GUARD_NAME and call.args and isinstance(call.args[0], ast.Call) \
                and _is_torch_compile(call.args[0].func):
            self.compiled.update(names)
            self.guarded_names.update(names)

    def _call(self, node: ast.Call, where: str, found: Scan, pools: bool, parents: dict) -> None:
        """Compiles, thread starts and lock/guard-like calls."""
        func = node.func
        if _is_torch_compile(func):
            found.compiles.append(f"{where} torch.compile({_arg_name(node)})")
        elif isinstance(func, ast.Attribute) and func.attr == "compile" and not _is_torchish(func.value) \
                and not node.args[:1] and _ident(func.value):
            self.compiled.add(_ident(func.value))  # model.compile(): nn.Module compiles itself in place
            found.compiles.append(f"{where} {_ident(func.value)}.compile()")
        elif _ident(func) == "Thread":
            target = next((k.value for k in node.keywords if k.arg == "target"), None)
            self._entry(target, where, f"Thread(target={_arg_label(target)})", found)
        elif pools and isinstance(func, ast.Attribute) and func.attr in ("submit", "map", "apply_async") \
                and node.args:
            self._entry(node.args[0], where, f"{_ident(func.value) or 'pool'}.{func.attr}({_arg_label(node.args[0])})",
                        found)
        elif _ident(func) in OTHER_GUARD_WORDS:
            self.seen.append(f"{where} {_ident(func)}(): not the proven guard on the path (seen, not proven)")

    def _entry(self, target: Optional[ast.AST], where: str, label: str, found: Scan) -> None:
        """A thread entry: the called function's name (through functools.partial), or a lambda noted."""
        found.threads.append(f"{where} {label}")
        if isinstance(target, ast.Call) and _ident(target.func) == "partial" and target.args:
            target = target.args[0]
        if isinstance(target, ast.Lambda):
            for call in (n for n in ast.walk(target.body) if isinstance(n, ast.Call)):
                if _ident(call.func):
                    self.entries.append((_ident(call.func), where))
            return
        if target is not None and _ident(target):
            self.entries.append((_ident(target), where))

    def runs_compiled(self, fn: ast.AST, depth: int = 0) -> bool:
        """Whether calling fn runs compiled code: it calls a compiled name, or a function that does."""
        key = id(fn)
        if key not in self._runs:
            self._runs[key] = False  # a recursive call is not evidence
            self._runs[key] = any(self._call_runs(c, depth) for c in _calls(fn))
        return self._runs[key]

    def _call_runs(self, call: ast.Call, depth: int) -> bool:
        name = _ident(call.func)
        if not name or _is_torch_compile(call.func):
            return False
        if name in self.compiled:
            return True
        return depth < 8 and any(self.runs_compiled(f, depth + 1) for f, _ in self.functions.get(name, []))

    def guarded(self, fn: ast.AST, depth: int = 0) -> bool:
        """Whether every call in fn that runs compiled code is under the proven guard, applied unconditionally."""
        key = id(fn)
        if key in self._guarded:
            return self._guarded[key]
        self._guarded[key] = False
        if getattr(fn, "name", None) in self.guarded_names:
            self._guarded[key] = True
            return True
        parents = _parents(fn)
        ok = True
        for call in _calls(fn):
            if not self._call_runs(call, depth):
                continue
            name = _ident(call.func)
            file = self.file_of.get(id(fn), "?")
            if name in self.guarded_names or _under_guard(call, fn, parents, self.seen, file):
                continue
            lock = _enclosing_with(call, fn, parents)
            if lock is not None and not any(_is_guard_item(i) for i in lock.items):
                self.seen.append(f"{file}:{lock.lineno} with {ast.unparse(lock.items[0].context_expr)[:40]}: around "
                                 "a compiled call: a lock does not help (seen, not proven)")
            if name not in self.compiled and depth < 8 and all(
                    self.guarded(f, depth + 1) for f, _ in self.functions.get(name, []) if self.runs_compiled(f)):
                continue
            ok = False
        self._guarded[key] = ok
        return ok

    def guard_sites(self, fn: ast.AST, depth: int = 0) -> list[str]:
        """Where the proven guard is applied on fn's path (for the evidence)."""
        file, name = self.file_of.get(id(fn), "?"), getattr(fn, "name", "?")
        out = [f"{file}:{n.lineno} with {GUARD_NAME}(...) in {name}()" for n in ast.walk(fn)
               if isinstance(n, ast.With) and any(_is_guard_item(i) for i in n.items)]
        if name in self.guarded_names:
            out.append(f"{file}:{fn.lineno} @{GUARD_NAME} {name}()")
        if not out and depth < 4:
            for call in _calls(fn):
                for callee, _ in self.functions.get(_ident(call.func), []):
                    if callee is not fn:
                        out += [x for x in self.guard_sites(callee, depth + 1) if x not in out]
        return out


def _enclosing_with(call: ast.AST, fn: ast.AST, parents: dict) -> Optional[ast.With]:
    """The innermost `with` around the call inside fn, if any."""
    node = call
    while node is not fn and node in parents:
        node = parents[node]
        if isinstance(node, ast.With):
            return node
    return None


def _under_guard(call: ast.AST, fn: ast.AST, parents: dict, seen: list[str], file: str) -> bool:
    """The call sits in a `with compile_guard(...)` whose path up to fn crosses no condition."""
    node, guard_with = call, None
    while node is not fn and node in parents:
        node = parents[node]
        if isinstance(node, ast.With) and any(_is_guard_item(i) for i in node.items):
            guard_with = guard_with or node
        if guard_with is not None and isinstance(node, CONDITIONAL) and node is not guard_with:
            note = (f"{file}:{guard_with.lineno} with {GUARD_NAME}(...) under a condition (line {node.lineno}): "
                    "seen, not proven")
            if note not in seen:
                seen.append(note)
            return False
    return guard_with is not None


def _is_guard_item(item: ast.withitem) -> bool:
    """`compile_guard(...)` or `guard.compile_guard(...)`."""
    e = item.context_expr
    return isinstance(e, ast.Call) and _ident(e.func) == GUARD_NAME


def _calls(fn: ast.AST) -> list[ast.Call]:
    """The calls in fn's body (nested functions' bodies included: they usually run from there)."""
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call)]


def _parents(tree: ast.AST) -> dict:
    """Child -> parent for every node under tree."""
    return {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}


def _condition(node: ast.AST, parents: dict) -> str:
    """'an if (line N)' when node sits under a condition, else ''."""
    while node in parents:
        node = parents[node]
        if isinstance(node, CONDITIONAL):
            return f"an {type(node).__name__.lower()} at line {getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return ""
    return ""


def _ident(node: Optional[ast.AST]) -> str:
    """The identifier a Name or Attribute node ends in."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _is_torchish(node: ast.AST) -> bool:
    """`torch` or an attribute chain starting at it."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "torch"


def _is_torch_compile(node: ast.AST) -> bool:
    """`torch.compile` (also `torch.compiler.compile`-style chains ending in compile under torch)."""
    return isinstance(node, ast.Attribute) and node.attr == "compile" and _is_torchish(node.value)


def _arg_name(call: ast.Call) -> str:
    """The first argument's identifier, for an evidence line."""
    return (_ident(call.args[0]) or "...") if call.args else ""


def _arg_label(node: Optional[ast.AST]) -> str:
    """How a thread's target reads in an evidence line."""
    if isinstance(node, ast.Lambda):
        return "lambda"
    return _ident(node) or "..."
