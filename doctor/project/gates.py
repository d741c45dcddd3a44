"""Which option of the script decides whether a line of the project's code runs: the `if` above it (`if
wandb_log and master_process:` over nanoGPT's `import wandb`, read as its `--wandb_log` option), or, for a line
inside a function, the `if` above a call of that function (nanoGPT's `from transformers import ...` inside
`GPT.from_pretrained`, which train.py calls only under `elif init_from.startswith('gpt2')`: `--init_from`).

Read from the source (ast), never run: it says what the code says (the line runs only where the test holds, and
the test reads this option), not whether the test holds on this launch; the caller asks the command for that.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Optional

from dfdoctor.project import Project, read
from dfdoctor.project.options import Option
from dfdoctor.project.reach import parents_of
from dfdoctor.project.source import Module

MAX_CALL_DEPTH = 2  # a function's callers, and theirs: deeper chains are not followed


@dataclass(frozen=True)
class Gate:
    """The `if` a line runs under, and the option its test reads."""

    test: str  # the test's source: `wandb_log and master_process`
    where: str  # file:line of the `if`
    option: Option
    via: str = ""  # where the line's function is called from, when the `if` is above that call

    def words(self) -> str:
        """"only when `TEST` holds (WHERE), which OPTION decides (OPTION's file:line, its default)"."""
        o = self.option
        how = f"{o.flag} turns on" if o.switch else f"{o.flag} decides"
        default = "" if o.switch else f", {o.default!r} by default"
        via = f", {self.via}" if self.via else ""
        return f"only when `{self.test}` holds ({self.where}{via}), which {how} ({o.where}{default})"

    def turned_on(self) -> str:
        """The option as a user gives it to take the branch, where that reads off its kind (a switch, a boolean
        off by default); else the flag alone."""
        o = self.option
        if o.switch:
            return o.flag
        if o.value_if_not_given is False:
            return o.spelled("True")
        return o.flag


def holds_by_default(gate: Gate, project) -> Optional[bool]:
    """Whether the gate's test holds with every option at its default (what a launch that gives none of them
    gets), or None where that cannot be told from the text alone: a name that is no option, a call beyond a
    string's own tests. The test is read, not run (nothing of the project runs in dfdoctor's process)."""
    defaults = {o.dest: o.value_if_not_given for o in project.options.options}
    try:
        return bool(_value(ast.parse(gate.test, mode="eval").body, defaults))
    except _Unknown:
        return None


class _Unknown(Exception):
    """A part of a test whose value the text alone does not give."""


_STR_TESTS = {"startswith", "endswith", "lower", "upper", "strip"}
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Is: lambda a, b: a is b,
            ast.IsNot: lambda a, b: a is not b, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _value(node: ast.AST, defaults: dict) -> object:
    """The value of a test's part over the options' defaults: constants, option names (`wandb_log`, `args.wandb`),
    `and`/`or`/`not`, equality and membership, and a string's startswith/endswith/lower/upper/strip."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return tuple(_value(e, defaults) for e in node.elts)
    if isinstance(node, ast.Name) and node.id in defaults:
        return defaults[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in defaults:
        return defaults[node.attr]  # args.wandb: the parsed arguments' field
    if isinstance(node, ast.BoolOp):  # an `and` stops at its first false part: the parts after it need no value
        for part in node.values:
            v = _value(part, defaults)
            if bool(v) == isinstance(node.op, ast.Or):
                return v
        return v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, defaults)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _value(node.left, defaults), _value(node.comparators[0], defaults)
        try:
            return _COMPARE[type(node.ops[0])](left, right)
        except TypeError:
            raise _Unknown() from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STR_TESTS \
            and not node.keywords:
        receiver = _value(node.func.value, defaults)
        args = [_value(a, defaults) for a in node.args]
        if isinstance(receiver, str) and all(isinstance(a, (str, tuple)) for a in args):
            return getattr(receiver, node.func.attr)(*args)
    raise _Unknown()


def gate_project(ctx, spec) -> Project:
    """The project of the job's script, with the arguments the command gives it."""
    return replace(read([], Path(spec.cwd or ctx.cwd), script=str(spec.script)), args=tuple(spec.script_args))


def gate_of(project, file: str | Path, line: int) -> Optional[Gate]:
    """The gate of the import (or any statement) at `file:line` of the project's code, or None where no `if` with
    an option of the script's in its test is above it (or above a call of its function)."""
    module = _module(project, Path(file))
    if module is None or module.tree is None:
        return None
    node = next((n for n in ast.walk(module.tree) if isinstance(n, ast.stmt) and getattr(n, "lineno", 0) == line),
                None)
    return _above(project, module, node, 0) if node is not None else None


def _module(project, path: Path) -> Optional[Module]:
    """The project's parsed file at `path` (the script or a module of the project it imports)."""
    try:
        want = path.resolve()
    except OSError:
        return None
    return next((m for m in project.files if m.path.resolve() == want), None)


def _above(project, module: Module, node: ast.AST, depth: int) -> Optional[Gate]:
    """Walk up from `node`: the first `if` whose test reads an option; at a function, the `if`s above its calls."""
    parents = parents_of(module.tree)
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child is not parent.test:
            option = _option_read(project, parent.test)
            if option is not None:
                return Gate(ast.unparse(parent.test), f"{module.rel}:{parent.lineno}", option)
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return _at_calls(project, module, parent, depth) if depth < MAX_CALL_DEPTH else None
        child, parent = parent, parents.get(parent)
    return None


def _at_calls(project, module: Module, fn: ast.AST, depth: int) -> Optional[Gate]:
    """The gate above a call of the function `fn` (by its name: `from_pretrained(...)`, `GPT.from_pretrained(...)`)
    in the project's files; every call found must be under one, or the function may run on every launch."""
    inside = {id(n) for n in ast.walk(fn)}  # a call in its own body (another library's method of that name) is not one
    gates = [_above(project, m, call, depth + 1) for m, call in _calls(project, fn.name) if id(call) not in inside]
    if not gates or any(g is None for g in gates):
        return None
    g = gates[0]
    return Gate(g.test, g.where, g.option, via=f"the `if` over the call of {fn.name}, {module.rel}:{fn.lineno}")


def _calls(project, name: str) -> Iterator[tuple[Module, ast.Call]]:
    """Each call of a function or method named `name` in the project's files, with the file it is in."""
    for m in project.files:
        for n in ast.walk(m.tree) if m.tree is not None else ():
            if isinstance(n, ast.Call) and (getattr(n.func, "id", None) == name or
                                            getattr(n.func, "attr", None) == name):
                yield m, n


def _option_read(project, test: ast.AST) -> Optional[Option]:
    """The script's option a test reads: an attribute of the parsed arguments (`args.wandb`), else a plain name
    (nanoGPT's configurator globals, `wandb_log`)."""
    attrs = [n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
    names = [n.id for n in ast.walk(test) if isinstance(n, ast.Name)]
    for word in attrs + names:
        option = project.option(word)
        if option is not None:
            return option
    return None
