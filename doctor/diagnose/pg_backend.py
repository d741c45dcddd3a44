"""Which process-group backend a job's ranks will form, read from its command and its script without running it.

Every form a public script uses is read: the backend given positionally (`init_process_group("gloo")`, PyTorch's
DDP tutorial), by keyword, through a variable or a function's default, through an argparse option's default that
the command may override (`--backend=gloo`), as `dist.Backend.GLOO`, as a device map (`"cuda:nccl,cpu:gloo"`), as
`"nccl" if torch.cuda.is_available() else "gloo"`, or not at all (torch then picks gloo where no GPU is, and
NCCL for CUDA tensors where one is). What cannot be read plainly (several calls that disagree, a computed value, no
call in the script: Lightning, accelerate and a package's own module start the group elsewhere) is None, and the
caller decides from what it observes instead.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Optional

from dfdoctor.diagnose.static_value import command_option, has_configurator, parser_option

# torch's own choice when init_process_group is given no backend (torch.distributed.Backend.default_device_backend_map)
TORCH_DEFAULT_WITH_GPU = "cuda:nccl,cpu:gloo"
_UNREAD = object()  # an expression whose value is not plain


@dataclasses.dataclass(frozen=True)
class BackendReading:
    """The backend a job asks for where a GPU is visible and where none is (the same string unless the job's code
    chooses by torch.cuda.is_available()), and where that was read."""

    with_gpu: str
    without_gpu: str
    why: str
    option: Optional[str] = None  # the command-line option that sets it, where the script has one (--backend)

    def on(self, gpu_visible: bool) -> str:
        return self.with_gpu if gpu_visible else self.without_gpu

    def always_nccl(self) -> bool:
        """Whether the job initialises NCCL whatever the machine (a GPU-less one then fails)."""
        return uses_nccl(self.with_gpu) and uses_nccl(self.without_gpu)


def uses_nccl(backend: str) -> bool:
    """'nccl', 'NCCL', 'cuda:nccl,cpu:gloo': a group that needs NCCL for some of its tensors."""
    return "nccl" in backend.lower()


def read_backend(command: list[str], cwd: Path) -> Optional[BackendReading]:
    """The backend the job's ranks will use, and why; None when that is not plain."""
    given = command_option(command, ("backend", "dist-backend", "dist_backend"))
    if given:
        value, spelled = given[0].lower(), given[1]
        return BackendReading(value, value, f"the command passes {spelled}", spelled.split("=")[0].split()[0])
    script = next((cwd / a for a in command if a.endswith(".py") and (cwd / a).is_file()), None)
    if script is None:
        return None
    try:
        tree = ast.parse(script.read_text(errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "init_process_group"]
    if not calls:
        return None
    readings = {_call_backend(call, tree, command) for call in calls}
    if _UNREAD in readings or len({r[:2] for r in readings}) != 1:
        return None
    with_gpu, without_gpu, line, how, option = min(readings, key=lambda r: r[2])
    return BackendReading(with_gpu, without_gpu, f"{script.name}:{line} {how}", option)


def _called(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def _call_backend(call: ast.Call, tree: ast.AST, command: list[str]):
    """(with GPU, without GPU, line, words, option) for one init_process_group call, or _UNREAD."""
    expr = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
    if expr is None:
        if any(k.arg is None for k in call.keywords):  # **kwargs: the backend may be in there
            return _UNREAD
        return (TORCH_DEFAULT_WITH_GPU, "gloo", call.lineno,
                "calls init_process_group with no backend, so torch picks it by the machine", None)
    value = _value(expr, tree, command)
    if value is _UNREAD:
        return _UNREAD
    with_gpu, without_gpu, line, how, option = value
    return with_gpu, without_gpu, line or call.lineno, how, option


def _value(expr: ast.AST, tree: ast.AST, command: list[str], depth: int = 0):
    """(with GPU, without GPU, line or None, words, option or None) an expression names, or _UNREAD."""
    if depth > 4:
        return _UNREAD
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value:
        v = expr.value.lower()
        return v, v, None, f"calls init_process_group with the backend {expr.value!r}", None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, (ast.Name, ast.Attribute)) and \
            getattr(expr.value, "attr", getattr(expr.value, "id", "")) == "Backend":
        v = expr.attr.lower()  # dist.Backend.GLOO
        return v, v, None, f"calls init_process_group with Backend.{expr.attr}", None
    if isinstance(expr, ast.IfExp):
        gpu_first = _asks_for_gpu(expr.test)
        if gpu_first is None:
            return _UNREAD
        body = _value(expr.body, tree, command, depth + 1)
        other = _value(expr.orelse, tree, command, depth + 1)
        if _UNREAD in (body, other):
            return _UNREAD
        yes, no = (body, other) if gpu_first else (other, body)
        return (yes[0], no[1], expr.lineno,
                f"chooses the backend by torch.cuda.is_available(): {yes[0]!r} with a GPU, {no[1]!r} without", None)
    if isinstance(expr, ast.Name):
        return _name_value(expr.id, tree, command, depth)
    if isinstance(expr, ast.Attribute):  # args.backend, cfg.dist_backend: an option of the script's parser
        return _option_default(expr.attr, tree, command)
    return _UNREAD


def _asks_for_gpu(test: ast.AST) -> Optional[bool]:
    """True for `torch.cuda.is_available()`, False for its negation, None for any other test."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if negated else test
    if isinstance(inner, ast.Call) and _called(inner) == "is_available" and \
            getattr(getattr(inner.func, "value", None), "attr", "") == "cuda":
        return not negated
    return None


def _name_value(name: str, tree: ast.AST, command: list[str], depth: int):
    """What a variable holds: every assignment to it agrees, or a function parameter's default."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and node.value is not None:
            found.append((node.lineno, node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults) + \
                list(node.args.kw_defaults)
            found += [(node.lineno, default) for arg, default in zip(args, defaults) if arg.arg == name]
    if not found or any(v is None for _, v in found):
        return _UNREAD  # a parameter without a default: the caller passes it
    values = [(_value(v, tree, command, depth + 1), line) for line, v in found]
    if any(v is _UNREAD for v, _ in values) or len({v[:2] for v, _ in values}) != 1:
        return _UNREAD
    value, line = min(values, key=lambda r: r[1])
    # a configurator (nanoGPT's `exec(open('configurator.py').read())`) lets `--backend=gloo` override a module-level
    # name of the same spelling
    option = f"--{name}" if has_configurator(tree) and any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        for n in getattr(tree, "body", ())) else None
    given = command_option(command, (name,)) if option else None
    if given:
        return given[0].lower(), given[0].lower(), line, f"sets {name}, which the command overrides with {given[1]}", option
    if value[0] == value[1] and value[3].startswith("calls init_process_group with the backend "):
        return value[0], value[1], line, f"sets {name} = {value[0]!r} and the command does not override it", option
    return value[0], value[1], value[2] or line, value[3], option or value[4]


def _option_default(attr: str, tree: ast.AST, command: list[str]):
    """The value of the parser option whose destination is `attr`: the command's, else the option's default."""
    found = parser_option(tree, attr)
    if found is None:
        return _UNREAD
    node, flags = found
    flag = flags[0] if flags else attr
    given = command_option(command, tuple(f.lstrip("-") for f in flags if f.startswith("-")))
    if given:
        v = given[0].lower()
        return v, v, node.lineno, f"takes the backend from an option the command sets: {given[1]}", flag
    default = next((k.value for k in node.keywords if k.arg == "default"), None)
    if isinstance(default, ast.Constant) and isinstance(default.value, str) and default.value:
        v = default.value.lower()
        return (v, v, node.lineno, f"gives {flag} the default {default.value!r} and the command does not override it",
                flag if flag.startswith("-") else None)
    return _UNREAD
