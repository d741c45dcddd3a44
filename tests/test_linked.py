"""tests/support/linked.py: the dev venv's link tree checked against the checkout (Makefile, strict editable)."""

from __future__ import annotations

from pathlib import Path

from support.linked import unlinked


def _files(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")


def test_a_module_added_to_any_part_of_the_checkout_is_named_and_compiled_files_are_not(tmp_path):
    repo, package = tmp_path / "repo", tmp_path / "site" / "dfdoctor"
    _files(repo, "doctor/__init__.py", "doctor/cli/main.py", "checks/__init__.py", "trainer/__main__.py",
           "templates/report.html.j2", "doctor/__pycache__/cli.cpython-311.pyc", "doctor/README.txt~")
    _files(package, "__init__.py", "cli/main.py", "checks/__init__.py", "trainer/__main__.py",
           "templates/report.html.j2")
    assert unlinked(repo, package) == []
    _files(repo, "doctor/cli/new.py", "checks/probes/new_probe.py", "templates/new.css")
    assert unlinked(repo, package) == ["checks/probes/new_probe.py", "doctor/cli/new.py", "templates/new.css"]
