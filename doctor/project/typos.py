"""A missing module or name that is a typo of an installed one: said as a reviewer would, never installed.

`import torchh as torch` is not a missing install: `torch` is installed, and `torchh` on the package index is
an unrelated project, so `pip install torchh` would put a stranger's code into the training interpreter. What
is installed near the missing name is observed in the job's interpreter (checks/probes/_near.py: by
imports.smoke's probe before the launch, by a short run of it after a launch died). The wording is shared, so
`check` and the launch's verdict say the same:

- a top-level module close to an installed one, which the project does not declare: "did you mean `torch`
  (installed, 2.13.0)?", and the fix edits the import; no `pip install`;
- a submodule of an installed package (`torch.nn.functionl`): the installed package has no such module; a
  close one is offered, and reinstalling the package is never the fix;
- `from torch.utils.data import DataLoder`: "torch.utils.data has no `DataLoder`; did you mean `DataLoader`?".
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Optional

from dfdoctor.checks import probes as _probes

NEAR_SCRIPT = Path(_probes.__file__).resolve().with_name("_near.py")
ASK_TIMEOUT_S = 30.0  # the parent package of a missing submodule is imported (torch: seconds on a busy machine)


def installed(item: dict[str, Any], near: Optional[dict] = None) -> str:
    """"`torch` (installed, 2.13.0)"; a submodule: "`torch.nn.functional` (in torch 2.13.0)"."""
    if near and near.get("parent"):
        top, version = near["parent"].split(".")[0], near.get("parent_version")
        return f"`{item['name']}` (in {top}{' ' + version if version and version != 'standard library' else ''})"
    version = item.get("version")
    return f"`{item['name']}` (installed{', ' + version if version else ''})"


def module_question(missing: str, near: Optional[dict], install=None) -> Optional[str]:
    """"did you mean `torch` (installed, 2.13.0)?" for a missing module with an installed name close to it;
    "did you mean `torchvision` (declared in requirements.txt:2, not installed)?" for one close to a requirement
    the project declares and the interpreter lacks."""
    meant = declared_near(missing, near, install)
    if meant is not None:
        return _declared_question(meant)
    names = (near or {}).get("near") or []
    if not names:
        return None
    return "did you mean " + " or ".join(installed(n, near) for n in names[:2]) + "?"


def module_fix(missing: str, near: Optional[dict], where: str, declared: Optional[str], install=None,
               python: Optional[str] = None) -> Optional[str]:
    """The fix for a missing module that is a typo (or a submodule an installed package lacks); None when the
    ordinary answer (install what the project declares, or a name nothing installed is close to) applies.
    `install`: the project's (project.install.Install), to compare the name with what it declares."""
    meant = None if declared else declared_near(missing, near, install)
    if meant is not None:
        return _declared_fix(missing, meant, where, install, python)
    near = near or {}
    names = near.get("near") or []
    parent = near.get("parent")
    if parent:  # the package is installed: reinstalling it cannot add a module it does not have
        top = parent.split(".")[0]
        version = f" {near['parent_version']}" if near.get("parent_version") else ""
        if names:
            return (f"Fix the import at {where}: {parent} has no module `{missing.rsplit('.', 1)[-1]}`; "
                    f"{_mean(names)} ({top}{version} is installed; no install is needed or was tried).")
        return (f"{top}{version} is installed and {parent} has no module `{missing.rsplit('.', 1)[-1]}`: check the "
                f"import at {where} against the {top} version the code was written for (the project's pins); "
                "reinstalling the same version would not add it, and nothing was tried.")
    if declared or not names:
        return None
    return (f"Fix the import at {where}: {module_question(missing, near)} `{missing.split('.')[0]}` is not a name "
            f"this project declares (requirements, pyproject, README install lines), so dfdoctor does not offer "
            f"`pip install {missing.split('.')[0]}`: on the package index that name may be an unrelated project. "
            f"If `{missing.split('.')[0]}` is what the code means, declare it in the project's requirements first.")


def declared_near(missing: str, near: Optional[dict], install) -> Optional[tuple[str, str, str, Optional[str]]]:
    """(import name, distribution, where, extra) of a requirement the project declares, not installed, whose
    import name is close to a missing top-level module (`torchvison`: `torchvision`, requirements.txt:2), by
    the rule installed names are held to (_near.close), and closer than any installed name. None: no such
    requirement, the name is exactly one the project declares (that is a missing install), or what is installed
    was not looked at (`near` None: then "not installed" is not known)."""
    if install is None or not isinstance(near, dict) or near.get("parent") or "." in missing:
        return None
    from dfdoctor.checks.probes import _near  # the same closeness as for installed names; a failure's path only
    from dfdoctor.project.install import import_names
    if install.declares(missing) is not None:
        return None
    seen = {n["name"] for n in near.get("near") or []}  # the installed names closest to it, best first
    declared: dict[str, tuple[str, str, Optional[str]]] = {}
    for dist, where, extra in install.declared():
        for name in import_names(dist):
            declared.setdefault(name, (dist, where, extra))
    # one ranking of both: a declared name that is installed is among `seen`, and one that is not is meant only
    # where it is closer than every installed name (`torchh` is torch, installed, even beside a declared torchx)
    best = _near.close(missing, seen | set(declared))
    if not best or best[0] in seen or best[0] not in declared:
        return None
    return (best[0], *declared[best[0]])


def _declared_question(meant: tuple[str, str, str, Optional[str]]) -> str:
    name, dist, where, _ = meant
    of = "" if name == dist else f"of `{dist}`, "
    return f"did you mean `{name}` ({of}declared in {where}, not installed)?"


def _declared_fix(missing: str, meant: tuple[str, str, str, Optional[str]], where: str, install,
                  python: Optional[str]) -> str:
    _, dist, declared_at, extra = meant
    top = missing.split(".")[0]
    line, whose = install.line_for(declared_at, python or "python", extra)
    return (f"Fix the import at {where}: {_declared_question(meant)} The project's own line installs {dist} into "
            f"{python or 'the training interpreter'}: `{line}` ({whose}; dfdoctor did not try this fix). `{top}` is not a "
            "name the project declares, so dfdoctor offers no install of it: on the package index that name may be "
            "an unrelated project.")


def _mean(names: list[dict]) -> str:
    return "did you mean " + " or ".join(f"`{n['name']}`" for n in names[:2]) + "?"


def name_words(near_name: Optional[dict], where: str, pin: Optional[tuple[str, str]] = None
               ) -> Optional[tuple[str, str]]:
    """(summary, fix) for `from MODULE import NAME` where the installed MODULE lacks NAME: the close name it
    defines; or, with none close and no pin of the project that disagrees with the installed version (`pin`:
    (where, version)), that the installed version lacks it, without a reinstall. None: a pin disagrees, so
    the known dependency-mismatch reading applies."""
    if not near_name:
        return None
    if not near_name.get("near"):
        return _absent(near_name, where, pin)
    module, wrong, right = near_name["module"], near_name["name"], near_name["near"][0]
    version = f" {near_name['version']}" if near_name.get("version") else ""
    owner = f"standard library's {module}" if version == " standard library" else \
        f"installed {module.split('.')[0]}{version}"
    also = f" (or `{near_name['near'][1]}`)" if len(near_name["near"]) > 1 else ""
    return (f"{module} has no `{wrong}`; did you mean `{right}`{also}? ({where})",
            f"Fix the name at {where}: `{right}`. The {owner} defines it; no "
            "reinstall is needed, and none was tried.")


def ask(python: str, args: list[str], cwd: Optional[str] = None, env: Optional[dict] = None) -> Optional[dict]:
    """Run _near.py in the job's interpreter (`module NAME` or `name MODULE ATTR`); its answer, or None."""
    try:
        out = subprocess.run([python, str(NEAR_SCRIPT), *args], capture_output=True,
                             text=True, timeout=ASK_TIMEOUT_S, cwd=cwd or None, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    lines = out.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if out.returncode == 0 and lines else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None



def _absent(near_name: dict, where: str, pin: Optional[tuple[str, str]]) -> Optional[tuple[str, str]]:
    """No name close to the missing one: another version may have it, but only a pin that disagrees says so."""
    module, wrong, version = near_name["module"], near_name["name"], near_name.get("version")
    top = module.split(".")[0]
    if not version or version == "standard library" or (pin and pin[1] != version):
        return None
    pinned = f"{pin[0]} pins this version" if pin else "the project pins no version of it"
    return (f"{module} has no `{wrong}`, and no name close to it, in the installed {top} {version} ({where})",
            f"Check `{wrong}` at {where} against {top}'s documentation for {version}: {pinned}, so dfdoctor offers "
            "no reinstall (none was tried); if the code was written for another version, pin that one in the "
            "project's requirements.")


def pin_of(install, module: str) -> Optional[tuple[str, str]]:
    """(where, version) of the project's `NAME==VERSION` requirement for a module's distribution, if any."""
    if install is None:
        return None
    where = install.declares(module)
    if where is None:
        return None
    for file, line, req in install.requirements:
        if f"{file}:{line}" == where and "==" in req:
            return where, req.split("==", 1)[1].split(";")[0].split(",")[0].strip()
    return None
