"""Whether a call of a script runs on every run of it: proved from its source, or not said.

args.paths may fail (not only warn) on a missing path only where the code is proved to read it on every run: a
read at module level, or in a function the module calls at its end (`main()`, under `if __name__ ==
"__main__":`), with nothing before it on the way that can leave or choose (a `return`, `raise`, `sys.exit()`,
`break`, an existence check of a path) and nothing around it that may skip it or catch its error (an `if`, a
loop, a `try`, a `with` other than `open`'s, a conditional expression, a lambda or a function nobody calls). Anything else is not proved,
and stays a warning.
"""

from __future__ import annotations

import ast
from typing import Optional

from dfdoctor.project.source import call_name

MAX_CALL_DEPTH = 3  # main() -> train() -> load(): deeper chains are not followed
_EXITS = {"sys.exit", "exit", "quit", "os._exit"}
_PLAIN_CONTEXTS = {"open", "io.open", "torch.no_grad", "torch.inference_mode"}
_CHECKS = ("exists", "isfile", "isdir", "is_file", "is_dir", "access")


def always_runs(tree: ast.Module, call: ast.Call, parents: Optional[dict] = None) -> bool:
    """The call runs on every run of the module as a script (proved from the tree; False: not proved).
    `parents`: parents_of(tree), when many calls of one tree are asked about."""
    return _reached(call, parents if parents is not None else parents_of(tree), tree, 0)


def parents_of(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node's parent."""
    out: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def _reached(node: ast.AST, parents: dict, tree: ast.Module, depth: int) -> bool:
    """Walk up from `node` to the module: every step must be one that always runs what it holds."""
    while True:
        parent = parents.get(node)
        if parent is None:
            return False
        if isinstance(node, ast.stmt):  # a statement runs always only as one of a block that always runs
            if not (isinstance(parent, (ast.Module, ast.FunctionDef)) or _plain_with(parent) or
                    _main_guard(parent, node)):
                return False  # an if, a loop, a try: it may be skipped, or its error caught
            body = parent.body
            if node not in body or not _nothing_leaves_before(body, body.index(node)):
                return False
            if isinstance(parent, ast.Module):
                return True
            if isinstance(parent, ast.FunctionDef):
                return _always_called(parent, parents, tree, depth)
            node = parent
            continue
        comp = _first_iterable(node, parents)
        if comp is not None:  # `[... for line in open(p)]`: its first iterable is evaluated at once
            node = comp
            continue
        if not _evaluated_always(parent, node):
            return False
        node = parent


def _evaluated_always(parent: ast.AST, child: ast.AST) -> bool:
    """Within one statement: whether evaluating `parent` always evaluates `child` (not a branch of `x if c else
    y` or of `a or b`, a lambda's body, a comprehension's element, an except clause)."""
    if isinstance(parent, ast.IfExp):
        return child is parent.test
    if isinstance(parent, ast.BoolOp):
        return child is parent.values[0]
    return not isinstance(parent, (ast.Lambda, ast.comprehension, ast.ListComp, ast.SetComp, ast.DictComp,
                                   ast.GeneratorExp, ast.ExceptHandler))


def _first_iterable(node: ast.AST, parents: dict) -> Optional[ast.AST]:
    """The comprehension whose first iterable `node` is (evaluated eagerly, in the enclosing scope)."""
    gen = parents.get(node)
    comp = parents.get(gen) if isinstance(gen, ast.comprehension) else None
    if comp is not None and comp.generators[0] is gen and gen.iter is node:
        return comp
    return None


def _plain_with(node: ast.AST) -> bool:
    """A `with` whose context managers cannot swallow an error (`open(...)`; not `suppress(OSError)`)."""
    return isinstance(node, ast.With) and all(
        isinstance(i.context_expr, ast.Call) and call_name(i.context_expr) in _PLAIN_CONTEXTS for i in node.items)


def _main_guard(parent: ast.AST, node: ast.AST) -> bool:
    """`if __name__ == "__main__":` at module level, holding `node` in its body: true when run as a script."""
    if not isinstance(parent, ast.If) or node not in parent.body:
        return False
    t = parent.test
    return isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__" and \
        len(t.comparators) == 1 and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__"


def _nothing_leaves_before(body: list[ast.stmt], index: int) -> bool:
    """No statement before `index` in the block can leave it or choose by a path's existence."""
    for stmt in body[:index]:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # defined, not run
        for n in _walk_same_scope(stmt):
            if isinstance(n, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                return False
            if isinstance(n, ast.Call):
                name = call_name(n)
                if name in _EXITS or name.rsplit(".", 1)[-1] in _CHECKS:
                    return False
    return True


def _walk_same_scope(node: ast.AST):
    """ast.walk without descending into nested functions, lambdas and classes."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(c)


def _always_called(fn: ast.FunctionDef, parents: dict, tree: ast.Module, depth: int) -> bool:
    """A module-level function that a statement always run calls by its name, with no argument needed."""
    if parents.get(fn) is not tree or depth >= MAX_CALL_DEPTH or fn.decorator_list:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == fn.name and \
                _is_statement_call(node, parents) and _reached(node, parents, tree, depth + 1):
            return True
    return False


def _is_statement_call(call: ast.Call, parents: dict) -> bool:
    """`main()` as a statement of its own (or `sys.exit(main())`), not inside another expression."""
    parent = parents.get(call)
    if isinstance(parent, ast.Expr):
        return True
    return isinstance(parent, ast.Call) and call_name(parent) in _EXITS and isinstance(parents.get(parent), ast.Expr)
