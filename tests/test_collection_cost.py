"""What collecting the suite costs: every pytest process (each xdist worker and `make test`'s collection) imports
every test file, so what a file imports at its top is paid nine times a run, though one worker runs its tests.
A heavy library a few files use is imported by their tests (support/lazy_module.py), not at collection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# a plugin that writes the modules loaded once the files are collected
_NOTE = """
import json, os, sys
def pytest_collection_finish(session):
    with open(os.environ["NOTE_MODULES"], "w") as f:
        json.dump({"modules": sorted(sys.modules), "items": len(session.items)}, f)
"""


def test_collecting_the_html_action_and_pep508_tests_imports_neither_jinja2_pyyaml_nor_packaging(tmp_path: Path):
    """Jinja2 with the HTML renderer (137 M instructions of a collection), PyYAML (89 M) and packaging's
    requirements (68 M) are imported by the tests that render a page, read action.yml or compare with packaging,
    not when their files are collected."""
    (tmp_path / "note_modules.py").write_text(_NOTE)
    files = [f"tests/{name}.py" for name in ("test_html", "test_html_browser", "test_html_compiled", "test_action",
                                             "test_ci_recipes", "test_deps_pep508")]
    env = {**os.environ, "NOTE_MODULES": str(tmp_path / "modules.json"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p",
                        "note_modules", *files], cwd=TESTS.parent, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    noted = json.loads((tmp_path / "modules.json").read_text())
    assert noted["items"] > 20, p.stdout
    loaded = set(noted["modules"])
    assert not {"jinja2", "yaml", "dfdoctor.render.html", "dfdoctor.render.compiled", "packaging.requirements",
                "packaging.markers", "packaging.specifiers"} & loaded
