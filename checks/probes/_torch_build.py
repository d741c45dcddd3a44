"""What torch build the interpreter has, read from torch/version.py without importing torch.

Standard library only, Python 3.6 syntax: it runs in the training interpreter (cuda.init's probe, the probe
server). Importing torch costs about a CPU-second; a build whose own version.py says it has no CUDA and no HIP
(a CPU-only build: `cuda = None`, `hip = None`) can use no GPU through torch whatever the machine has, and that
file says so without the import. Anything less certain (torch not found, no version.py beside it, a file that
does not parse, a value that is not a literal) reads as unknown: then only importing torch tells.
"""

import ast
import importlib.util
import os

_FIELDS = ("__version__", "cuda", "hip")
_UNKNOWN = object()


def read():
    """{"version", "cuda", "hip", "file", "version_file"} of the torch this interpreter would import, or None
    when they cannot be read for certain."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or not spec.submodule_search_locations:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "version.py")
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(1 << 20))
    except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    found = {}
    for node in tree.body:
        for name, value in _assigned(node):
            found[name] = _UNKNOWN if name in found else _literal(value)  # set twice: not a plain reading
    if any(found.get(f, _UNKNOWN) is _UNKNOWN for f in _FIELDS) or not isinstance(found["__version__"], str):
        return None
    return {"version": found["__version__"], "cuda": found["cuda"], "hip": found["hip"], "file": spec.origin,
            "version_file": path}


def cpu_only(build):
    """Whether a build read by `read` has neither CUDA nor HIP."""
    return build is not None and build["cuda"] is None and build["hip"] is None


def _assigned(node):
    """(name, value node) for each plain name a top-level statement assigns (`cuda = None`,
    `cuda: Optional[str] = None`); anything else that binds one of our names counts as set twice."""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [(node.target.id, node.value)] if node.target.id in _FIELDS else []
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in _FIELDS]
        plain = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        return [(n, node.value if plain else None) for n in names]
    bound = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    bound += [(a.asname or a.name).split(".")[0] for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names]
    return [(n, None) for n in bound if n in _FIELDS]


def _literal(value):
    if value is None:
        return _UNKNOWN
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN
