"""Whether the dev venv's dfdoctor sees every module of the checkout.

`make venv` installs dfdoctor editable in setuptools' strict mode: a tree of links to the checkout's files. An edit
shows at once; a module added since is not linked, and its import fails far from the cause. The session stops
first with the one line that says so."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

# setup.cfg's package_dir: where each part of the `dfdoctor` package lives in the checkout
PARTS = {"doctor": "", "checks": "checks", "trainer": "trainer", "templates": "templates"}
KINDS = (".py", ".j2", ".css", ".sh", ".txt")


def unlinked(repo: Path, package: Path) -> list[str]:
    """The checkout's package files that the installed `package` folder does not have."""
    missing = []
    for src, under in PARTS.items():
        for folder, dirs, files in os.walk(repo / src):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            rel = os.path.relpath(folder, repo / src)
            for name in files:
                if name.endswith(KINDS) and not (package / under / rel / name).exists():
                    missing.append(os.path.normpath(os.path.join(src, rel, name)))
    return sorted(missing)


def stale_line(repo: Path) -> Optional[str]:
    """One line to stop on, where the dev venv's dfdoctor is a link tree that lacks a file of the checkout."""
    import dfdoctor
    package = Path(dfdoctor.__file__).parent
    if "__editable__" not in str(package):
        return None
    missing = unlinked(repo, package)
    if not missing:
        return None
    return (f"the venv's dfdoctor does not link {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
            f"(added since `make venv`): run `make venv`")
