"""What dfdoctor sends to a target's python (the recorder, the target agent, the probe bootstrap, the masking
rules the recorder embeds, the probes) runs there as text, on the Python 3.6+ that docs/launch.md promises: its
syntax must be 3.6's and its imports the standard library's."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from dfdoctor import redact
from dfdoctor.launch import agent_ranks, agent_waits, recorder, target_agent
from dfdoctor.rehearse import sentinel
from dfdoctor.slurm import job_agent
from dfdoctor.targets import probe_bootstrap

PROBES = Path(__file__).resolve().parents[1] / "checks" / "probes"
SHIPPED = [Path(m.__file__) for m in (recorder, target_agent, agent_waits, agent_ranks, job_agent,
                                     probe_bootstrap, redact, sentinel)] + \
    sorted(p for p in PROBES.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_source_is_python_3_6(path):
    tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 6))
    futures = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "__future__"
               for a in n.names]
    assert "annotations" not in futures, f"{path.name}: `from __future__ import annotations` needs 3.7"


def _imported_on_load(tree: ast.Module):
    """The top-level names a module imports when it is loaded (a function's own imports, torch's in the
    probes, run only when called, and only where the function guards them)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module and node.level == 0:
                yield node.module.split(".")[0]
        else:
            todo.extend(ast.iter_child_nodes(node))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_source_loads_with_the_standard_library_and_its_siblings_only(path):
    siblings = {p.stem for p in path.parent.glob("*.py")}
    foreign = {m for m in _imported_on_load(ast.parse(path.read_text())) if m not in siblings
               and m not in ("__future__", "dfdoctor") and m not in sys.stdlib_module_names}
    assert not foreign, f"{path.name} imports {sorted(foreign)} when loaded"
