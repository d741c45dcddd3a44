"""What the job's code imports, read with ast: is a requirement that is not installed one the job needs?

A requirements file speaks for a whole project: llm.c's lists `datasets`, which only its data-preparation scripts
import; train_gpt2.py runs without it. That the distribution is missing is observed; that this job needs it is
only the file's say. The job's own code answers the question better, but as a reading, so it can only soften a
failure into a warning, and only where the reading accounts for everything:

- the entry script was read (a file, parsed), with the project's own modules it imports (doctor/project);
- no import in them is computed (`importlib.import_module`, `__import__`): a name could hide there;
- every module they import that the training interpreter cannot find is named after another missing requirement
  (`tiktoken` for `tiktoken`): a missing distribution whose import name differs from its own (`PyYAML` gives
  `yaml`) could provide an import nobody can find, so then none is softened.

A missing requirement that none of these imports is named after (its own name, or a known import name of it:
`install.PIP_NAMES`) is then not the job's: a warning, never a pass, and never a blocked launch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from dfdoctor import project
from dfdoctor.project.install import PIP_NAMES, canonical
from dfdoctor.project.readme import ReadmeLine
from dfdoctor.lazy_re import compile_later

_DYNAMIC = compile_later(r"\bimport_module\(|\b__import__\(")


@dataclass(frozen=True)
class JobImports:
    """The top-level modules the job's code imports (its own modules left out), and the files read for them."""

    modules: tuple[str, ...]
    files: tuple[str, ...]  # as shown to the user: the script first
    dynamic: bool  # some import is computed: the reading cannot be complete
    install_lines: tuple[ReadmeLine, ...] = ()  # the install lines of the project's README, read with it

    def names(self, dist: str) -> bool:
        """Whether some import of the job is named after the distribution `dist` (its name or a known import name)."""
        return any(canonical(dist) in _dists_of(m) for m in self.modules)

    def softens(self, dist: str, missing: Iterable[str], unfound: Iterable[str]) -> bool:
        """The missing `dist` is not the job's: no import is named after it, no import is computed, and every
        import the interpreter cannot find is named after one of the `missing` distributions."""
        missing = list(missing)
        explained = all(any(canonical(d) in _dists_of(m) for d in missing) for m in unfound)
        return not self.dynamic and explained and not self.names(dist)


def read_job_imports(script: Optional[Path], cwd: Path) -> Optional[JobImports]:
    """What the entry script and the project's modules it imports import; None when the script cannot be read."""
    if script is None or not script.is_file() or script.suffix not in ("", ".py"):
        return None
    try:
        proj = project.read([], cwd, script=str(script))
    except (OSError, RecursionError, ValueError):
        return None
    if not proj.files or proj.files[0].tree is None:
        return None  # imports.smoke reports a script that does not compile
    roots = [script.parent, cwd, proj.root]
    modules: list[str] = []
    for m in proj.files:
        for top in _imports(m.tree):
            if top not in modules and not _local(top, roots):
                modules.append(top)
    return JobImports(tuple(modules), tuple(m.rel for m in proj.files),
                      any(_DYNAMIC.search(m.text) for m in proj.files),
                      proj.install.readme if proj.install else ())


def _imports(tree: Optional[ast.AST]) -> list[str]:
    """Top-level names of every absolute import in a module, nested ones (inside functions, `if`) included."""
    names: list[str] = []
    for node in ast.walk(tree) if tree is not None else ():
        found = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        names += [n.split(".")[0] for n in found]
    return names


def _local(top: str, roots: list[Path]) -> bool:
    """A module of the project itself (a file or a package folder beside the script, in cwd or the root). A folder
    without Python files is not one: `wandb/` holds wandb's runs, and `import wandb` is the distribution's."""
    return any((r / f"{top}.py").is_file() or (r / top).is_dir() and any((r / top).glob("*.py")) for r in roots)


def _dists_of(module: str) -> set[str]:
    """The distribution names an import name may be installed as (canonical)."""
    return {canonical(module)} | ({canonical(PIP_NAMES[module])} if module in PIP_NAMES else set())
