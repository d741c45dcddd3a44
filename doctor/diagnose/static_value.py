"""The value an expression of a job's script holds, read from its source and its command line without running it.

A missing path named only in `assert os.path.exists(path)`, a backend passed as `args.dist_backend`: the value is
followed through the script's assignments, its argparse options (the command's value, else the option's default)
and a configurator's `--name=value` overrides, through os.path.join and f-strings. What cannot be followed (a call,
a loop variable, several assignments that disagree) is None: the caller says what it could not read.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Callable, Optional



def command_option(command: list[str], names: tuple[str, ...]) -> Optional[tuple[str, str]]:
    """(value, as spelled) of `--NAME=V` or `--NAME V` in the command, for any of `names` (without dashes)."""
    for i, word in enumerate(command):
        for name in names:
            m = re.fullmatch(rf"--{re.escape(name)}(?:=(.+))?", word)
            if not m:
                continue
            value = m.group(1) if m.group(1) is not None else (command[i + 1] if i + 1 < len(command) else "")
            if value and not value.startswith("-"):
                return value, f"--{name}={value}" if m.group(1) is not None else f"--{name} {value}"
    return None


def parser_option(tree: ast.AST, attr: str) -> Optional[tuple[ast.Call, list[str]]]:
    """The `add_argument` call whose destination is `attr` (`--data-dir` for args.data_dir), with its flags: the
    project model's reading of the parser (doctor/project/options.py), so both read a script's options alike."""
    from dfdoctor.project.options import argparse_calls  # start-up: the project model (issue 45)
    for node, option in argparse_calls(tree):
        if option.dest == attr:
            return node, [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return None


def has_configurator(tree: ast.AST) -> bool:
    """Whether the script execs a configurator that sets its module-level names from `--name=value` (nanoGPT)."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith("configurator.py")
               for n in ast.walk(tree))


class Reading:
    """A string expression's value, and the options of the command line that set part of it. `bound` gives the
    value of a function's parameters where the caller is known (a traceback's frames: see `traced_value`)."""

    def __init__(self, tree: ast.AST, command: list[str],
                 bound: Optional[dict[str, Callable[[], tuple[Optional[str], list[str]]]]] = None):
        self.tree, self.command, self.bound = tree, command, bound or {}
        self.options: list[str] = []  # "--data-dir (default 'data')": what the user can change

    def value(self, expr: ast.AST, depth: int = 0) -> Optional[str]:
        if depth > 6:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.JoinedStr):
            parts = [self.value(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1) for v in expr.values]
            return None if None in parts else "".join(parts)  # type: ignore[arg-type]
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Div)):
            left, right = self.value(expr.left, depth + 1), self.value(expr.right, depth + 1)
            if left is None or right is None:
                return None
            return left + right if isinstance(expr.op, ast.Add) else os.path.join(left, right)  # Path / "x"
        if isinstance(expr, ast.Call):
            name = getattr(expr.func, "attr", getattr(expr.func, "id", ""))
            if name == "join" and expr.args:  # os.path.join
                parts = [self.value(a, depth + 1) for a in expr.args]
                return None if None in parts else os.path.join(*parts)  # type: ignore[arg-type]
            if name in ("Path", "PurePath", "str", "expanduser", "abspath", "realpath", "normpath") and \
                    len(expr.args) == 1:
                return self.value(expr.args[0], depth + 1)
            return None
        if isinstance(expr, ast.Name):
            return self._name(expr.id, depth)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            return self._option(expr.attr, depth)
        return None

    def _name(self, name: str, depth: int) -> Optional[str]:
        """Every assignment to `name` in the script gives the same value (a configurator's override first); a
        parameter whose caller is known has the value its caller passed."""
        if name in self.bound:
            value, options = self.bound[name]()
            self.options += options
            return value
        module_level = any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                             for t in n.targets) for n in getattr(self.tree, "body", ()))
        if module_level and has_configurator(self.tree):
            given = command_option(self.command, (name,))
            if given:
                self.options.append(given[1])
                return given[0]
        values = {self.value(n.value, depth + 1) for n in ast.walk(self.tree) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)}
        if len(values) != 1:
            return None
        (value,) = values
        if value is not None and module_level and has_configurator(self.tree):
            self.options.append(f"--{name} (default {value!r})")
        return value

    def _option(self, attr: str, depth: int) -> Optional[str]:
        """args.ATTR: the command's value of its option, else the option's default."""
        found = parser_option(self.tree, attr)
        if found is None:
            return None
        node, flags = found
        flag = next((f for f in flags if f.startswith("--")), flags[0] if flags else attr)
        given = command_option(self.command, tuple(f.lstrip("-") for f in flags if f.startswith("-")))
        if given:
            self.options.append(given[1])
            return given[0]
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        value = self.value(default, depth + 1) if default is not None else None
        if value is not None:
            self.options.append(f"{flag} (default {value!r})")
        return value


def traced_value(frames: list[tuple[str, int, Optional[str]]], index: int, expr: ast.AST, command: list[str],
                 depth: int = 0) -> tuple[Optional[str], list[str]]:
    """The value of `expr` at frame `index` of a traceback (outermost first), and the options that set it: a
    parameter of the frame's function is followed into its caller's frame, where the call passed it (wlm's
    `assert os.path.exists(path)` in `tokenize(self, path)`, called as `self.tokenize(os.path.join(path,
    'train.txt'))` in `Corpus(args.data)`). The traceback says which call ran, the source what it passed."""
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
    file, line, _ = frames[index]
    tree = tree_of(file)
    if tree is None:
        return None, []
    bound = {}
    fn, cls = _function_at(tree, line)
    if fn is not None and index > 0 and depth < 6:
        caller = tree_of(frames[index - 1][0])
        call = _call_at(caller, frames[index - 1][1], cls.name if cls is not None and fn.name == "__init__"
                        else fn.name) if caller is not None else None
        if call is not None:
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            if cls is not None and params and not any(getattr(d, "id", "") == "staticmethod"
                                                      for d in fn.decorator_list):
                params = params[1:]  # self / cls: the call does not pass it
            given = {p: a for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)}
            given.update({k.arg: k.value for k in call.keywords if k.arg})
            for name, arg in given.items():
                bound[name] = (lambda a=arg: traced_value(frames, index - 1, a, command, depth + 1))
    reading = Reading(tree, command, bound)
    value = reading.value(expr)
    return value, list(dict.fromkeys(reading.options))


def _function_at(tree: ast.AST, line: int):
    """(the innermost function whose body holds `line`, the class it is a method of, or None)."""
    best, owner = None, None
    stack = [(tree, None)]
    while stack:
        node, cls = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    child.lineno <= line <= (child.end_lineno or child.lineno):
                if best is None or child.lineno >= best.lineno:
                    best, owner = child, cls
                stack.append((child, None))
            elif isinstance(child, ast.ClassDef):
                stack.append((child, child))
            else:
                stack.append((child, cls))
    return best, owner


def _call_at(tree: ast.AST, line: int, name: str) -> Optional[ast.Call]:
    """The one call of `name` (`tokenize`, `self.tokenize`, `data.Corpus`) in the statement at `line`."""
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno)
             and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While,
                                    ast.With, ast.Try))]
    if not stmts:
        return None
    stmt = min(stmts, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
    calls = [c for c in ast.walk(stmt) if isinstance(c, ast.Call) and
             getattr(c.func, "attr", getattr(c.func, "id", None)) == name]
    return calls[0] if len(calls) == 1 else None
