"""Names close to a missing one, as the training interpreter sees them. Standard library only; runs there.

A module that is not found is, more often than a missing install, a typo: `import torchh`, `torch.nn.functionl`,
`from torch.utils.data import DataLoder`. On the package index `torchh` may be a real, unrelated project, so the
answer to a typo must be the installed name, not `pip install` of the typo. This compares the missing name with
what is there: the installed top-level modules (found on sys.path without importing them), the submodules of
the parent package, and the names a module defines. imports.smoke's probe imports it; the launch's verdict runs
it as a script (`python _near.py module NAME` / `python _near.py name MODULE ATTR`) in the job's interpreter.
"""

import difflib
import importlib
import importlib.util
import json
import pkgutil
import sys

MAX_NEAR = 3
# torchh/torch 0.91, transfomers/transformers 0.95, functionl/functional 0.95, numpyy/numpy 0.91; below it:
# timm/time 0.75, a real distribution beside a standard module
CUTOFF = 0.8


def close(word, candidates):
    """The candidates most like `word`, best first: the same letters in another case first, then difflib's."""
    candidates = sorted(set(c for c in candidates if c and c != word))
    same_case = [c for c in candidates if c.lower() == word.lower()]
    rest = difflib.get_close_matches(word, candidates, n=MAX_NEAR, cutoff=CUTOFF)
    return (same_case + [c for c in rest if c not in same_case])[:MAX_NEAR]


def top_level_modules():
    """Every top-level module this interpreter can import, found on sys.path without importing any."""
    names = set(sys.builtin_module_names)
    names.update(getattr(sys, "stdlib_module_names", ()))
    try:
        names.update(m.name for m in pkgutil.iter_modules())
    except Exception:  # noqa: BLE001 - an unreadable folder on sys.path: what was read still counts
        pass
    return names


def version_of(top):
    """'2.13.0' for an installed distribution's import name, 'standard library', or None when unknown."""
    if top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names:
        return "standard library"
    try:
        import importlib.metadata as md
    except ImportError:  # Python before 3.8
        return None
    try:
        dists = md.packages_distributions().get(top) or [top]  # 3.10+
    except Exception:  # noqa: BLE001
        dists = [top]
    try:
        return md.version(dists[0])
    except Exception:  # noqa: BLE001 - no metadata (a folder on PYTHONPATH): installed, version unknown
        return None


def near_module(name):
    """{"parent", "parent_version", "near": [{"name", "version"}]} for a module `name` that is not found.

    For `a.b.c` the deepest parent that imports is searched (its submodules); for a top-level name, the
    installed top-level modules. `parent` is None when even the top-level package is not there."""
    parts = name.split(".")
    parent = None
    for i in range(len(parts) - 1, 0, -1):
        cand = ".".join(parts[:i])
        try:
            mod = importlib.import_module(cand)
        except Exception:  # noqa: BLE001 - a parent that does not import is not the place to look
            continue
        parent = (cand, mod)
        break
    if parent is None:
        found = close(parts[0], top_level_modules())
        return {"parent": None, "near": [{"name": n, "version": version_of(n)} for n in found]}
    pname, mod = parent
    if getattr(mod, "__file__", None) is None:  # a namespace package (google.*): its parts are distributions
        return {"parent": None, "near": []}
    word = parts[len(pname.split("."))]
    subs = submodules(mod)
    found = close(word, subs | set(n for n in dir(mod) if not n.startswith("_")))
    return {"parent": pname, "parent_version": version_of(parts[0]),
            "near": [{"name": pname + "." + n, "version": None} for n in found]}


def submodules(mod):
    """The names of a package's submodules (nothing for a plain module)."""
    try:
        return set(m.name for m in pkgutil.iter_modules(getattr(mod, "__path__", None) or []))
    except Exception:  # noqa: BLE001
        return set()


def near_name(module, attr):
    """{"module", "version", "near": [names]} for `from module import attr` where module lacks attr."""
    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001
            return None
    names = set(n for n in dir(mod) if not n.startswith("__")) | submodules(mod)
    return {"module": module, "name": attr, "version": version_of(module.split(".")[0]), "near": close(attr, names)}


if __name__ == "__main__":
    if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
        del sys.path[0]  # this file's folder must not stand for the job's (a module of its own may be named alike)
    # Printed on the last line of stdout; whatever the imports printed before it is ignored by the reader.
    if len(sys.argv) == 3 and sys.argv[1] == "module":
        result = near_module(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "name":
        result = near_name(sys.argv[2], sys.argv[3])
    else:
        result = None
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
