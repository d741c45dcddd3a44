"""What dfdoctor sends to a target's python (the agent: the recorder, the target agent, the probe bootstrap, the
masking rules, their loader; the probes) runs there as text, on the Python 3.6+ that docs/launch.md promises: its
syntax must be 3.6's and its imports the standard library's (or the agent's own)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dfdoctor.agent import ship
from dfdoctor.rehearse import sentinel

PROBES = Path(__file__).resolve().parents[1] / "checks" / "probes"
SHIPPED = ship.shipped_files() + [ship.AGENT_DIR / "detach.py", Path(sentinel.__file__)] + \
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


def test_the_agent_imports_nothing_of_dfdoctor_but_itself():
    for path in ship.shipped_files():
        names = [n.module for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)] + \
            [a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in names if m and m.split(".")[0] == "dfdoctor" and not m.startswith("dfdoctor.agent")], \
            path.name


def _parsed_needs(part: str) -> list[Path]:
    """What `part`'s zip must hold, found by parsing the agent's modules (the way ship.needed_by found it before
    round 19): every module its imports of the agent reach, from functions too."""
    todo, seen = [ship.PARTS[part].rsplit(".", 1)[1], "__init__"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((ship.AGENT_DIR / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dfdoctor.agent"):
                todo += [node.module.split(".")[2]] if node.module != "dfdoctor.agent" else [a.name for a in node.names]
    return sorted(ship.AGENT_DIR / f"{name}.py" for name in seen)


@pytest.mark.parametrize("part", sorted(ship.PARTS))
def test_each_part_ships_what_its_imports_reach_found_without_parsing_the_agent(part, monkeypatch):
    parsed, real, parses = _parsed_needs(part), ast.parse, []
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parses.append(1) or real(*a, **k))
    found = ship.needed_by(part)
    monkeypatch.undo()
    assert found == parsed
    assert not parses, "the agent's modules were parsed on the way to a launch's start (0.03-0.1 s of it)"


def test_an_agent_module_s_own_imports_are_read_in_each_form_it_writes_them():
    text = ("import os\nfrom dfdoctor.agent.procfs import (a,\n    b)\nfrom dfdoctor.agent import ranks as agent_ranks, "
            "names  # the marks, stop\n    from dfdoctor.agent import (  # deferred\n        mask,\n        atomic,\n    )\n"
            "from dfdoctor.agentx import y\nx = 'from dfdoctor.agent import nothing'\n")
    assert ship.own_imports(text) == ["procfs", "ranks", "names", "mask", "atomic"]


PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"


@pytest.mark.parametrize("version", ["3.6", "2.7", "here"])
def test_the_loader_runs_the_agent_from_stdin_or_says_python_is_too_old(tmp_path, version):
    """What a target's python gets (`python -c LOADER target-agent ...`, the agent's zip on stdin): an answer, or
    on a python older than 3.6 the words probe.py looks for, never a SyntaxError."""
    found = sorted(PYENV.glob(f"{version}.*/bin/python")) if version != "here" else [Path(sys.executable)]
    if not found:
        pytest.skip(f"no CPython {version} under {PYENV}")
    out = subprocess.run(ship.stdin_argv(str(found[-1]), "target-agent", str(tmp_path), "0", "0"),
                         input=ship.stdin_line("target-agent"), capture_output=True, timeout=60)
    if version == "2.7":
        assert out.returncode == 1 and out.stderr.decode().startswith(ship.TOO_OLD), out.stderr
    else:
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout.decode().split("@@dfdoctor-answer@@", 1)[1])
        assert answer["recorder_alive"] is False and answer["files"]["record.jsonl"] is None


def test_the_loader_reads_the_agent_on_stdin_without_zipfile(tmp_path):
    """The agent on stdin is its zip's files in one marshalled dict (`ship.line_of`): the loader reads it with marshal
    and zlib. zipfile, and what it imports, were a tenth of the start of every part run on a target this way."""
    python, *rest = ship.stdin_argv(sys.executable, "stop", str(tmp_path / "no-run"), "5")
    out = subprocess.run([python, "-X", "importtime", *rest], input=ship.stdin_line("stop"), capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.decode().split("@@dfdoctor-answer@@", 1)[1])
    assert answer["stopped"] == [] and answer["recorder"] is None
    imported = [line.rsplit("|", 1)[1].strip() for line in out.stderr.decode().splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "dfdoctor.agent.procfs" in imported and "zipfile" not in imported  # the agent came in, zipfile did not


def test_a_poll_of_a_run_folder_starts_without_site_or_what_only_a_look_at_a_live_job_needs(tmp_path):
    """The watch's polls of a run folder on a target (`target-agent RUN_DIR 0 0`) are most of the python3 starts a
    target sees: each starts with -S (no site, no .pth of the target's site-packages) and imports only what a poll
    reads with: not the py-spy runner's subprocess and shutil, not the wait readers' socket, not importlib.util or
    base64 in the loader. Together 119 -> 73 M instructions a start (Debian's python3.11, valgrind)."""
    python, *rest = ship.stdin_argv(sys.executable, "target-agent", str(tmp_path), "0", "0")
    assert rest[0] == "-S"
    out = subprocess.run([python, "-X", "importtime", *rest], input=ship.stdin_line("target-agent"),
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.decode().split("@@dfdoctor-answer@@", 1)[1])
    assert answer["recorder_alive"] is False and answer["files"]["record.jsonl"] is None
    imported = {line.rsplit("|", 1)[1].strip() for line in out.stderr.decode().splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "dfdoctor.agent.procfs" in imported and "json" in imported  # the part came in (import_module: no line)
    assert not imported & {"site", "subprocess", "shutil", "socket", "importlib.util", "base64"}, imported


def test_a_probe_answers_in_a_file_of_its_own_without_importing_tempfile(tmp_path):
    """_probe_support.answer, which every probe calls: the answer lands whole, 0600, by a rename over whatever was
    there (a planted symlink is replaced, its target untouched), no temporary file left. Without tempfile (15 M
    instructions of each probe's start on Debian's python3.11, a bare `python3 -S` being 21 M)."""
    probe = tmp_path / "p.py"
    probe.write_text(f"import sys\nsys.path.insert(0, {str(PROBES)!r})\nfrom _probe_support import answer\n"
                     "answer({'a': [1, 'x']})\n")
    victim = tmp_path / "victim"
    victim.write_text("mine")
    out = tmp_path / "out" / "answer.json"
    out.parent.mkdir()
    out.symlink_to(victim)
    ran = subprocess.run([sys.executable, "-S", "-X", "importtime", str(probe)], capture_output=True, timeout=60,
                         env=dict(os.environ, DFDOCTOR_PROBE_OUT=str(out)))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(out.read_text()) == {"a": [1, "x"]} and not out.is_symlink() and victim.read_text() == "mine"
    assert oct(out.stat().st_mode & 0o777) == oct(0o600) and os.listdir(out.parent) == ["answer.json"]
    imported = {line.rsplit("|", 1)[1].strip() for line in ran.stderr.decode().splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "_probe_support" in imported and "tempfile" not in imported, imported
