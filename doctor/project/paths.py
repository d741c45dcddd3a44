"""The files a project's code reads, writes and deletes, and what names each path: a literal, an option
(`args.data`, `config.system.work_dir`), or both (`os.path.join(args.work_dir, 'model.pt')`). Read from the source
only; which call reads and which writes is decided by the call and its mode, never by a file's name."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from dfdoctor.project import reach
from dfdoctor.project.source import Module, call_name, const

# call name (its last dotted parts) -> (what it does, which positional argument is the path)
_CALLS = {
    "torch.load": ("read", 0), "np.load": ("read", 0), "numpy.load": ("read", 0), "np.fromfile": ("read", 0),
    "np.loadtxt": ("read", 0), "pd.read_csv": ("read", 0), "Image.open": ("read", 0), "read_text": ("read", -1),
    "read_bytes": ("read", -1), "np.memmap": ("read", 0), "json.load": ("read", 0),
    "torch.save": ("write", 1), "np.save": ("write", 0), "np.savez": ("write", 0), "np.savetxt": ("write", 0),
    "tofile": ("write", 0), "to_csv": ("write", 0), "savefig": ("write", 0), "write_text": ("write", -1),
    "write_bytes": ("write", -1), "save_pretrained": ("write", 0), "urlretrieve": ("write", 1),
    "os.makedirs": ("mkdir", 0), "os.mkdir": ("mkdir", 0), "mkdir": ("mkdir", -1),
    "os.remove": ("delete", 0), "os.unlink": ("delete", 0), "shutil.rmtree": ("delete", 0), "unlink": ("delete", -1),
    "os.path.exists": ("check", 0), "os.path.isfile": ("check", 0), "os.path.isdir": ("check", 0),
    # a log the code opens itself: its folder must exist before the first line is logged
    "logging.basicConfig": ("log", 99), "logging.FileHandler": ("log", 0), "FileHandler": ("log", 0),
}
# Names that are modules, not the object holding the options.
_MODULES = {"os", "np", "numpy", "torch", "sys", "shutil", "json", "pd", "Path", "pathlib", "math", "time"}


@dataclass(frozen=True)
class PathUse:
    """One place the code touches a path."""

    file: str
    line: int
    mode: str  # read | write | mkdir | delete | check | log
    hint: Optional[str]  # the last literal part of the path: 'train.bin', 'traindata.pt', './data/wikitext-2'
    dest: Optional[str]  # the option or config key the path comes from: 'data', 'system.work_dir'
    always: bool = False  # the call runs on every run of its file as a script (proved: project/reach.py)
    # what the code puts before the option's value: "" where the value starts the path, "data/" for nanoGPT's
    # `os.path.join('data', dataset)`, None where it cannot be read (a variable part before it)
    under: Optional[str] = ""

    @property
    def where(self) -> str:
        """file:line."""
        return f"{self.file}:{self.line}"


def path_uses(m: Module) -> list[PathUse]:
    """Every read, write, folder creation, deletion and existence check of a path in the module."""
    if m.tree is None:
        return []
    names = _simple_assignments(m.tree)
    parents = reach.parents_of(m.tree)
    out = []
    seen: dict[ast.AST, dict[str, ast.AST]] = {}
    for node in ast.walk(m.tree):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        mode, arg = _what(name, node)
        if mode is None:
            continue
        target = _arg(node, name, arg)
        if target is None:
            continue
        scope = _in_function(node, parents, m.tree, names, seen)
        hint, dest = _describe(target, scope)
        if hint is None and dest is None:
            continue
        out.append(PathUse(m.rel, node.lineno, mode, hint, dest, always=reach.always_runs(m.tree, node, parents),
                           under=_under(target, scope) if dest else ""))
    return out


def _what(name: str, node: ast.Call) -> tuple[Optional[str], int]:
    """(mode, index of the path argument) of a call, or (None, 0) when it touches no path."""
    if name in ("open", "io.open", "codecs.open"):
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        text = const(mode) if mode is not None else "r"
        if not isinstance(text, str):
            return None, 0
        return ("write" if any(c in text for c in "wax") else "read"), 0
    for key, (mode, arg) in _CALLS.items():
        if name == key or name.endswith("." + key) or ("." not in key and name.rsplit(".", 1)[-1] == key and
                                                       "." in name):
            return mode, arg
    return None, 0


def _arg(node: ast.Call, name: str, index: int) -> Optional[ast.AST]:
    """The path argument: a positional one, or the receiver of a method (`Path(p).write_text(...)`: index -1)."""
    if index < 0:
        recv = node.func.value if isinstance(node.func, ast.Attribute) else None
        if isinstance(recv, ast.Call) and call_name(recv) in ("Path", "pathlib.Path") and recv.args:
            return recv.args[0]
        return recv
    if len(node.args) > index:
        return node.args[index]
    kw = {"torch.save": "f", "urlretrieve": "filename"}.get(name.rsplit(".", 1)[-1] if "." in name else name)
    return next((k.value for k in node.keywords if k.arg in (kw, "file", "path", "fname", "filename")), None)


def _describe(node: ast.AST, names: dict[str, ast.AST], depth: int = 0) -> tuple[Optional[str], Optional[str]]:
    """(last literal part, option dest) of a path expression."""
    if depth > 3:
        return None, None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, None
    if isinstance(node, ast.JoinedStr):
        lits = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        dests = [_describe(v.value, names, depth + 1)[1] for v in node.values if isinstance(v, ast.FormattedValue)]
        return (lits[-1] if lits else None), next((d for d in dests if d), None)
    if isinstance(node, ast.Attribute):
        parts, t = [], node
        while isinstance(t, ast.Attribute):
            parts.append(t.attr)
            t = t.value
        if isinstance(t, ast.Name) and t.id not in _MODULES:
            parts = list(reversed(parts))
            return None, ".".join(parts[1:] if t.id in ("self",) and len(parts) > 1 and parts[0] in
                                  ("args", "config", "cfg", "opt") else parts)
        return None, None
    if isinstance(node, ast.Name):
        if node.id in names:
            hint, dest = _describe(names[node.id], names, depth + 1)
            # a global bound to a literal may be a `--name=value` setting (nanoGPT's configurator)
            return hint, dest or (node.id if isinstance(names[node.id], ast.Constant) else None)
        return None, None
    if isinstance(node, ast.Call):  # os.path.join(a, 'b'), Path(a) / 'b', open(...) inside torch.save
        parts = [_describe(a, names, depth + 1) for a in node.args]
        hint = next((h for h, _ in reversed(parts) if h), None)
        dest = next((d for _, d in parts if d), None)
        return hint, dest
    if isinstance(node, ast.BinOp):  # Path(a) / 'b', 'out' + '/x'
        left, right = _describe(node.left, names, depth + 1), _describe(node.right, names, depth + 1)
        return right[0] or left[0], left[1] or right[1]
    return None, None


def _in_function(node: ast.AST, parents: dict, tree: ast.Module, names: dict[str, ast.AST],
                 seen: dict[ast.AST, dict[str, ast.AST]]) -> dict[str, ast.AST]:
    """The names a path expression inside a function may use: the module's, with each parameter of the function
    bound to what a call of it in the module passes (makemore's `create_datasets(args.input_file)`, then
    `open(input_file)` inside it: the option's value)."""
    func = node
    while func in parents and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        func = parents[func]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return names
    if func not in seen:
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        passed: dict[str, ast.AST] = {}
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and call_name(call) == func.name:
                for param, value in zip(params, call.args):
                    passed.setdefault(param, value)
                for k in call.keywords:
                    if k.arg in params:
                        passed.setdefault(k.arg, k.value)
        seen[func] = {**names, **passed}
    return seen[func]


def _under(node: ast.AST, names: dict[str, ast.AST], depth: int = 0) -> Optional[str]:
    """The literal path the code puts before the option's value in a path expression ("" when the value leads,
    "data/" for `os.path.join('data', dataset)`, None when a part before it is not a literal)."""
    if depth > 3:
        return None
    if isinstance(node, ast.Name):
        return _under(names[node.id], names, depth + 1) if node.id in names and \
            not isinstance(names[node.id], ast.Constant) else ""
    if isinstance(node, ast.Attribute):
        return ""
    if isinstance(node, ast.JoinedStr):  # f"data/{args.dataset}/x"
        before = ""
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                sub = _under(v.value, names, depth + 1) if _describe(v.value, names, depth + 1)[1] else None
                return None if sub is None else before + sub
            before += v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else ""
        return None
    parts = node.args if isinstance(node, ast.Call) else [node.left, node.right] \
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) else []
    before = []
    for part in parts:  # os.path.join('data', dataset, 'x'), Path('data') / args.dataset
        if _describe(part, names, depth + 1)[1]:
            sub = _under(part, names, depth + 1)
            return None if sub is None else "".join(p.rstrip("/") + "/" for p in before) + sub
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            return None
        before.append(part.value)
    return None


def _simple_assignments(tree: ast.Module) -> dict[str, ast.AST]:
    """`name = expr` anywhere in the module (the first one): enough to follow `work_dir = config.system.work_dir`."""
    out: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, node.value)
    return out
