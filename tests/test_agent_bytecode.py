"""The agent's zip carries this interpreter's cached bytecode of each module beside its source (issue 45: every
python dfdoctor started on a target compiled the agent's sources, 0.02 s of a recorder's start, 0.01 s of a
relay's). A target's python runs the bytecode where its magic number is this one's, through either way the zip
arrives (the loader's MemoryFinder on stdin, zipimport for agent.pyz), and the source otherwise; a cache that is not
valid for the file as it is now is never shipped."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import marshal
import os
import py_compile
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dfdoctor.agent import ship
from dfdoctor.agent.probe_bootstrap import MARK

PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
PROBE = "import json, os\nopen(os.environ['DFDOCTOR_PROBE_OUT'], 'w').write(json.dumps({'ran': 1}))\n"
POISON = b"raise SystemExit('dfdoctor test: the source ran')\n"


def _request() -> bytes:
    req = {"files": {"p.py": PROBE}, "script": "p.py", "args": [], "timeout": 60, "grace": 0.5, "env": {},
           "cwd": None, "python": None, "input": None}
    import zlib
    return base64.b64encode(zlib.compress(json.dumps(req).encode())) + b"\n"


def _cached_here() -> None:
    """This interpreter's cache of the agent's modules, as an import (or `make test`'s compileall) writes it."""
    for p in ship.needed_by("probe"):
        py_compile.compile(str(p), cfile=importlib.util.cache_from_source(str(p), optimization=""), doraise=True)
    ship.bundle.cache_clear()


def _poisoned(data: bytes) -> bytes:
    """The zip with probe_bootstrap's source replaced by a line that says so (its bytecode kept)."""
    src, buf = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for info in src.infolist():
            zf.writestr(info, POISON if info.filename == "dfdoctor/agent/probe_bootstrap.py" else src.read(info))
    return buf.getvalue()


def _held(argv: list, stdin: bytes) -> subprocess.CompletedProcess:
    """Run `argv` with its stdin held open (a session's: the bootstrap ends its probe when it closes) until its
    stdout closes."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p.stdin.write(stdin)
        p.stdin.flush()
        out, err = p.stdout.read(), p.stderr.read()
        p.wait(60)
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def _pythons() -> list[tuple[str, str]]:
    """(this interpreter, magic `same`), and where pyenv has them, one of another magic number each way."""
    out = [(sys.executable, "same")]
    for version in ("3.6", "3.12", "3.13"):
        found = sorted(PYENV.glob(f"{version}.*/bin/python{version}"))
        if found and subprocess.run([str(found[-1]), "-c", "import importlib.util, sys; sys.stdout.buffer.write("
                                     "importlib.util.MAGIC_NUMBER)"], capture_output=True).stdout != \
                importlib.util.MAGIC_NUMBER:
            out.append((str(found[-1]), "other"))
    return out


@pytest.mark.parametrize("how", ["stdin", "agent.pyz"])
def test_a_targets_python_runs_the_bytecode_where_its_magic_matches_else_the_source(tmp_path, how):
    _cached_here()
    data = ship.bundle("probe")
    assert "dfdoctor/agent/probe_bootstrap.pyc" in zipfile.ZipFile(io.BytesIO(data)).namelist()
    ran = {}
    for python, magic in _pythons():
        for name, zipped in (("as built", data), ("poisoned", _poisoned(data))):
            if how == "stdin":
                argv, stdin = ship.stdin_argv(python, "probe"), ship.line_of(zipped) + _request()
            else:
                pyz = tmp_path / f"{magic}-{name}.pyz"
                pyz.write_bytes(zipped)
                argv, stdin = [python, str(pyz), "probe"], _request()
            out = _held(argv, stdin)
            answered = MARK in out.stdout.decode()
            ran[(python, name)] = answered
            if name == "as built" or magic == "same":  # the bytecode ran (the source would have said so)
                assert answered and json.loads(out.stdout.decode().split(MARK)[1])["answer"] == '{"ran": 1}', \
                    (python, name, out.stderr.decode()[-800:])
            else:  # another python: the source beside it, whatever the bytecode holds
                assert not answered and "the source ran" in out.stderr.decode(), (python, out.stderr.decode()[-800:])
    assert len(ran) >= 2


def test_only_a_cache_valid_for_the_file_as_it_is_is_shipped(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    raise ValueError('here')\n")
    assert ship.bytecode(mod, mod.read_bytes(), "<dfdoctor agent>/m.py") is None  # none cached: nothing compiled
    cached = importlib.util.cache_from_source(str(mod), optimization="")
    py_compile.compile(str(mod), cfile=cached, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    pyc = ship.bytecode(mod, mod.read_bytes(), "<dfdoctor agent>/m.py")
    assert pyc[:4] == importlib.util.MAGIC_NUMBER and pyc[4:8] == (1).to_bytes(4, "little")  # unchecked hash
    assert pyc[8:16] == importlib.util.source_hash(mod.read_bytes())
    code = marshal.loads(pyc[16:])
    inner = next(c for c in code.co_consts if hasattr(c, "co_filename"))
    assert code.co_filename == inner.co_filename == "<dfdoctor agent>/m.py"  # no path of this machine
    mod.write_text("def f():\n    raise ValueError('there, longer')\n")  # changed since it was cached
    assert ship.bytecode(mod, mod.read_bytes(), "<dfdoctor agent>/m.py") is None
    py_compile.compile(str(mod), cfile=cached, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert ship.bytecode(mod, mod.read_bytes(), "<dfdoctor agent>/m.py") is not None
    assert ship.bytecode(mod, b"def f():\n    pass\n", "<dfdoctor agent>/m.py") is None  # not the source read


def test_the_bytecode_make_test_compiles_is_what_a_recorder_here_imports_and_the_zip_ships():
    """`make test` compiles the package where Python imports it from (compileall of dfdoctor's folder: in the
    editable install, the tree of links in build/). A recorder started here runs from that folder and imports
    that bytecode, and the zip ships it; from the links' targets (the checkout's doctor/agent/, no __pycache__),
    every recorder compiled its modules from source (198 M instructions of its start, 97 M with the bytecode)."""
    import compileall

    import dfdoctor.agent

    folder = os.path.dirname(os.path.abspath(dfdoctor.agent.__file__))
    assert compileall.compile_dir(folder, quiet=1)
    argv = ship.here_argv(sys.executable, "recorder", site=False)
    out = subprocess.run([argv[0], "-v", *argv[1:]], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage: recorder" in out.stderr  # no run folder: it imported all, then stopped
    for name in ("recorder", "record", "procfs"):
        cached = importlib.util.cache_from_source(os.path.join(folder, f"{name}.py"), optimization="")
        assert f"# {cached} matches " in out.stderr, (name, out.stderr[-1500:])
    ship.bundle.cache_clear()
    names = zipfile.ZipFile(io.BytesIO(ship.bundle("recorder"))).namelist()
    assert {"dfdoctor/agent/recorder.pyc", "dfdoctor/agent/record.pyc", "dfdoctor/agent/mask.pyc"} <= set(names)
