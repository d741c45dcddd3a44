"""Every install line a user may copy installs this tool: the distribution name setup.cfg gives, never `dfdoctor`
(on the public index that name is an unrelated project, so `pip install dfdoctor` would run a stranger's code)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from dfdoctor import registry

REPO = Path(__file__).resolve().parent.parent
# `pip install NAME` (also `.../bin/pip install -q NAME`), NAME a requirement and not a path or an option
_PIP = re.compile(r"\bpip3?\s+install\s+((?:-{1,2}[\w-]+(?:[ =]\S+)?\s+)*)"
                  r"(?P<name>[A-Za-z0-9][\w.-]*)(?=[\s`'\"=<>~!\[;]|$)")


def _distribution() -> str:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return cfg["metadata"]["name"]


def _texts() -> list[Path]:
    files = [REPO / "README.md", REPO / "action.yml", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "action").glob("*.sh")), *sorted(p for p in (REPO / "examples").rglob("*")
                                                           if p.suffix in (".md", ".toml", ".py", ".cfg"))]
    return [f for f in files if f.is_file()]


def test_the_distribution_is_not_the_index_s_other_dfdoctor() -> None:
    assert _distribution() != "dfdoctor"
    assert registry.DISTRIBUTION == _distribution()


def test_every_install_line_names_the_distribution() -> None:
    """Where a text names the index's name (the README says it is not published yet), it is this distribution's.
    The lines a user runs install from a checkout or its repository: tests/test_install_lines.py runs them."""
    name = _distribution()
    for path in _texts():
        for m in _PIP.finditer(path.read_text()):
            word = m.group("name")
            if word.lower().startswith("dfdoctor") and not word.lower().startswith("dfdoctor-plugin"):
                assert word == name, f"{path.relative_to(REPO)}: `{m.group(0)}` installs {word}, not {name}"


def test_a_plugin_depends_on_the_distribution() -> None:
    text = (REPO / "examples" / "dfdoctor-plugin-example" / "pyproject.toml").read_text()
    deps = re.search(r"dependencies\s*=\s*\[([^\]]*)\]", text).group(1)
    assert re.findall(r'"([^"]+)"', deps) == [_distribution()]
