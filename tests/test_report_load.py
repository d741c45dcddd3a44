"""`dfdoctor report` on a saved result that is not what it should be: exit 2 with one line, never a crash (3)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_dfdoctor
from support.in_process import run_here


def saved_report(tmp_path) -> dict:
    """A real saved result with every part filled: a check run that failed (log folder missing)."""
    res = run_dfdoctor("check", "--log", "no/dir/x.log", "--only", "log.*", "--format", "json", "--output",
                       "r.json", "--", "python3", "-c", "pass", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    return json.loads((tmp_path / "r.json").read_text())


WRONG = [
    ("[]", "not a dfdoctor/1 document (a JSON array, not an object)"),
    ("null", "not a dfdoctor/1 document (a JSON null, not an object)"),
    ('"report"', "not a dfdoctor/1 document (a JSON string"),
    ('{"schema": "dfdoctor/1", "verdict": "ok"}', "verdict must be an object, not a string"),
    ('{"schema": "dfdoctor/1", "command": "python train.py"}', "command must be an array, not a string"),
    ('{"schema": "dfdoctor/1", "checks": [{"id": 5, "status": "ok"}]}', "checks[0].id must be a string"),
    ('{"schema": "dfdoctor/1", "checks": [{"id": "a", "status": "great"}]}', "great"),
    ('{"schema": "dfdoctor/1", "timeline": [null]}', "timeline[0] must not be null"),
    ('{"schema": "dfdoctor/1", "tool": []}', "tool must be an object, not a array"),
]


@pytest.mark.parametrize("text, words", WRONG)
def test_a_wrong_document_is_one_line_and_exit_2(tmp_path, text, words):
    """Each document through every renderer. One format a document goes through the console script in a process of
    its own (in turn: each format is so run for some document), the others through its `run` here
    (support/in_process): 9 processes, not 36 (~2 CPU-s of starts that proved the same entry point again)."""
    (tmp_path / "r.json").write_text(text)
    formats = ("text", "json", "junit", "html")
    own = formats[WRONG.index((text, words)) % len(formats)]
    for fmt in formats:
        res = (run_dfdoctor if fmt == own else run_here)("report", "r.json", "--format", fmt, cwd=tmp_path)
        rc, out, err = res.returncode, res.stdout, res.stderr
        assert rc == 2, (fmt, out[-500:], err[-2000:])
        lines = err.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (fmt, err)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10**6, max_value=10**6) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["ok", "fail", "warn", "error", "running", "failed", "launch"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def _paths(doc, prefix=()):
    """Every place in a JSON document (as key/index paths)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@pytest.fixture(scope="module")
def base_doc(tmp_path_factory):
    return saved_report(tmp_path_factory.mktemp("base"))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_edit_of_a_saved_result_renders_or_is_refused(tmp_path, base_doc, data):
    """Replace any one field of a real saved result with any JSON value: every renderer either renders it or
    `report` says why not (exit 2); it never crashes (exit 3)."""
    from dfdoctor.cli.main import run
    doc = copy.deepcopy(base_doc)
    paths = [p for p in _paths(doc) if p and p != ("schema",)]
    where = data.draw(st.sampled_from(paths))
    value = data.draw(json_values)
    node = doc
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    (tmp_path / "r.json").write_text(json.dumps(doc))
    for fmt, out in (("text", "o.txt"), ("json", "o.json"), ("junit", "o.xml"), ("html", "o.html")):
        rc = run(["report", str(tmp_path / "r.json"), "--format", fmt, "--output", str(tmp_path / out)])
        assert rc in (0, 1, 2), (where, value, fmt)
