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
from typing import Optional


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
    """The `add_argument` call whose destination is `attr` (`--data-dir` for args.data_dir), with its flags."""
    spellings = {attr, attr.replace("_", "-")}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)),
                    None)
        if dest == attr or {f.lstrip("-") for f in flags} & spellings:
            return node, flags
    return None


def has_configurator(tree: ast.AST) -> bool:
    """Whether the script execs a configurator that sets its module-level names from `--name=value` (nanoGPT)."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith("configurator.py")
               for n in ast.walk(tree))


class Reading:
    """A string expression's value, and the options of the command line that set part of it."""

    def __init__(self, tree: ast.AST, command: list[str]):
        self.tree, self.command = tree, command
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
        """Every assignment to `name` in the script gives the same value (a configurator's override first)."""
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
