"""The HTML page's templates compiled ahead of time (dfdoctor/render/compiled.py): `make test` keeps Jinja2's
compiled code, every later report reads it instead of compiling the templates again, and the page is the page
compiled afresh. Code kept for another template source, or for other options, is never used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.html_samples import failed_launch, persistence_report


def jinja2():
    """jinja2: imported by the tests, not at collection (test_collection_cost.py)."""
    import jinja2
    return jinja2


def compiled():
    """dfdoctor.render.compiled: imported by the tests, not at collection (test_collection_cost.py)."""
    from dfdoctor.render import compiled
    return compiled


def html_render():
    """dfdoctor.render.html: imported by the tests, not at collection (test_collection_cost.py)."""
    from dfdoctor.render import html
    return html


@pytest.fixture
def templates(tmp_path: Path, monkeypatch):
    """The page's templates copied to a folder of the test's own, where html's environment reads them (and keeps
    their compiled code): the checkout's templates/__pycache__ is left alone."""
    folder = tmp_path / "templates"
    shutil.copytree(html_render().TEMPLATES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(html_render(), "TEMPLATES", folder)
    html_render()._environment.cache_clear()
    yield folder
    html_render()._environment.cache_clear()


def _compiling_fails(monkeypatch) -> None:
    def refuse(self, *args, **kwargs):
        raise AssertionError("a template was compiled, not read from the kept code")
    monkeypatch.setattr(jinja2().Environment, "compile", refuse)


def test_a_report_reads_the_kept_code_and_its_page_is_the_page_compiled_afresh(templates, monkeypatch):
    reports = [failed_launch(), persistence_report()]
    afresh = [html_render().render(r) for r in reports]  # compiled here, nothing kept
    assert not (templates / "__pycache__").exists()

    html_render()._environment.cache_clear()
    html_render().keep_compiled()  # what `make test` runs
    kept = sorted(p.name for p in (templates / "__pycache__").iterdir())
    assert len(kept) == 2 and all(name.endswith(".jinja") for name in kept), kept

    html_render()._environment.cache_clear()  # a later dfdoctor: its own environment, nothing compiled in memory
    _compiling_fails(monkeypatch)
    html_render().prepare()
    assert [html_render().render(r) for r in reports] == afresh


def test_kept_code_of_another_source_is_not_used(tmp_path, monkeypatch):
    folder, kept = tmp_path / "t", tmp_path / "kept"
    folder.mkdir()
    (folder / "page.j2").write_text("old {{ n }}")

    def environment(write: bool = False) -> jinja2().Environment:
        env = jinja2().Environment(loader=jinja2().FileSystemLoader(str(folder)), autoescape=True)
        env.bytecode_cache = compiled().KeptCode(kept, compiled().options_key(env), write=write)
        return env

    assert environment(write=True).get_template("page.j2").render(n=1) == "old 1"
    assert len(list(kept.iterdir())) == 1
    (folder / "page.j2").write_text("new {{ n }}")
    assert environment().get_template("page.j2").render(n=1) == "new 1"  # compiled again, not the kept "old"
    (folder / "page.j2").write_text("old {{ n }}")
    _compiling_fails(monkeypatch)
    assert environment().get_template("page.j2").render(n=2) == "old 2"  # the kept code, for its own source


def test_options_that_change_the_compiled_code_change_the_file_it_is_kept_in():
    def key(**options) -> str:
        return compiled().options_key(jinja2().Environment(**{"autoescape": True, **options}))

    assert key() == key()
    for options in ({"autoescape": False}, {"trim_blocks": True}, {"lstrip_blocks": True},
                    {"finalize": lambda v: v}, {"variable_start_string": "[["}, {"keep_trailing_newline": True}):
        assert key(**options) != key(), options


def test_a_torn_or_foreign_kept_file_compiles_as_before(tmp_path):
    folder, kept = tmp_path / "t", tmp_path / "kept"
    folder.mkdir()
    (folder / "page.j2").write_text("page {{ n }}")
    env = jinja2().Environment(loader=jinja2().FileSystemLoader(str(folder)))
    env.bytecode_cache = compiled().KeptCode(kept, compiled().options_key(env), write=True)
    env.get_template("page.j2")
    (only,) = kept.iterdir()
    only.write_bytes(only.read_bytes()[:20])  # torn
    env = jinja2().Environment(loader=jinja2().FileSystemLoader(str(folder)))
    env.bytecode_cache = compiled().KeptCode(kept, compiled().options_key(env))
    assert env.get_template("page.j2").render(n=3) == "page 3"
    only.write_bytes(b"not jinja at all")
    env = jinja2().Environment(loader=jinja2().FileSystemLoader(str(folder)))
    env.bytecode_cache = compiled().KeptCode(kept, compiled().options_key(env))
    assert env.get_template("page.j2").render(n=4) == "page 4"
