"""The one way dfdoctor's agent gets to a job's machine and starts there. It stays on this side (it is not in
the bundle, and may import dfdoctor): what travels is this package's real files, read from here.

- here: `here_argv` runs a part under any local interpreter straight from this folder (`python AGENT PART`);
- on a target, over a session's stdin: `stdin_argv` + `stdin_line` run a part under the target's python behind
  the fixed loader (`__main__.py`, sent as `python -S -c`), the files of the agent's zip on stdin's first line;
- on a target, to stay there: `ship_script` (ship.sh) writes the zip as RUN_DIR/agent.pyz and starts the
  recorder from it (`python agent.pyz recorder --detach RUN_DIR`);
- the strategy `dfdoctor` carries `detach_code` (detach.py) inside its shell line.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import marshal
import os
import re
import types
import zlib
from pathlib import Path
from typing import Optional

from dfdoctor.agent.__main__ import PARTS, TOO_OLD  # noqa: F401 (TOO_OLD: the words of a python too old, for probe.py)
from dfdoctor.agent.names import JOB_UMASK, MARKER, MARKER_TEXT  # the run folder's marker and the login umask, which ship.sh writes on a target

# This package's folder as Python imported it, never resolved: in the editable install (`make venv`'s tree of links,
# build/__editable__.*) that is where `make test`'s compileall wrote the bytecode, which a part run from here
# (`here_argv`) imports and `bytecode` ships. The links' targets (doctor/agent/) have no __pycache__: resolved, every
# recorder compiled its modules from source (198 M instructions of its start, 97 M with the bytecode), and no zip
# carried any bytecode. A wheel's install has no links: the same folder either way.
AGENT_DIR = Path(os.path.abspath(__file__)).parent
LOADER = AGENT_DIR / "__main__.py"
ZIP_NAME = "agent.pyz"  # what ship.sh names the zip in a target's run folder
NOT_SHIPPED = {"ship.py", "detach.py", "relay_here.py"}  # this module, the strategy's one-off (it travels in a
# shell line), and the relay's end here (it runs on this machine only)
CODE_NAME = "<dfdoctor agent>/"  # what the agent's code is named on a target (tracebacks), before its name in the zip
RUN_DIR_MARK = "@@dfdoctor-run-dir@@"
PID_MARK = "@@dfdoctor-recorder-pid@@"
PY_MARK = "@@dfdoctor-python@@"
END_MARK = "@@dfdoctor-end@@"


def shipped_files() -> list[Path]:
    """The agent's files that travel: every module of this package but NOT_SHIPPED."""
    return sorted(p for p in AGENT_DIR.glob("*.py") if p.name not in NOT_SHIPPED)


# An agent module's imports of its own package: `from dfdoctor.agent.NAME import ...` or `from dfdoctor.agent import
# NAME, ...` (parenthesised over lines too), as a line begins with them. Read with this pattern, not by parsing the
# module: `ast` on every agent module was 0.03-0.1 s of each launch's start on a target (issue 45, round 19), on the
# way to the recorder's start. tests/test_shipped_sources.py holds it to what parsing the modules finds.
_OWN_IMPORT = re.compile(r"^[ \t]*from[ \t]+dfdoctor\.agent(?:\.(\w+))?[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)


def own_imports(text: str) -> list[str]:
    """The agent's modules that the module of source `text` imports (`_OWN_IMPORT`)."""
    names = []
    for module, imported in _OWN_IMPORT.findall(text):
        if module:
            names.append(module)
            continue
        for word in re.sub(r"#[^\n]*", "", imported).strip().strip("()").split(","):
            if word.strip():
                names.append(word.split()[0])  # `ranks as agent_ranks`: ranks
    return names


def needed_by(part: str) -> list[Path]:
    """The agent's files that `part` imports, itself and its package included (what its zip must hold)."""
    todo, seen = [PARTS[part].rsplit(".", 1)[1], "__init__"], set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += own_imports((AGENT_DIR / f"{name}.py").read_text())
    return sorted(AGENT_DIR / f"{name}.py" for name in seen)


@functools.lru_cache(maxsize=None)
def bundle(part: str | None = None) -> bytes:
    """The agent as a zip python can run (`python agent.pyz PART`): the loader at its root, the package under
    dfdoctor/agent/ beneath an empty dfdoctor/; only what `part` needs when given (less to send for a probe). Each
    module's bytecode beside it where this interpreter has it cached (`bytecode`). The same bytes for the same
    files and caches (fixed dates)."""
    import zipfile  # here: only what goes to a --target is bundled; a local check, launch, status or stop never is
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        def add(name: str, data: bytes) -> None:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)

        add("__main__.py", LOADER.read_bytes())
        add("dfdoctor/__init__.py", b"")
        for path in needed_by(part) if part else shipped_files():
            name, source = f"dfdoctor/agent/{path.name}", path.read_bytes()
            add(name, source)
            pyc = bytecode(path, source, CODE_NAME + name)
            if pyc is not None:
                add(name + "c", pyc)
    return buf.getvalue()


def bytecode(path: Path, source: bytes, name: str) -> Optional[bytes]:
    """`path`'s bytecode as this interpreter cached it (its __pycache__ file, valid for `source`: the check its own
    import makes), as an unchecked hash-based .pyc whose code is named `name`; None where none is cached (nothing is
    compiled here: that would only move the work). A target's python uses it where its magic number is this one's
    (the loader's MemoryFinder, zipimport for agent.pyz) and compiles the source beside it otherwise (issue 45: every
    python dfdoctor started on a target compiled what it ran, 0.02 s of a recorder's start, 0.01 s of a relay's)."""
    try:
        data = Path(importlib.util.cache_from_source(str(path), optimization="")).read_bytes()
        st = path.stat()
    except (OSError, NotImplementedError, ValueError):
        return None
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER or len(source) != st.st_size:
        return None
    digest = importlib.util.source_hash(source)
    stamp = ((int(st.st_mtime) & 0xFFFFFFFF) | (st.st_size & 0xFFFFFFFF) << 32).to_bytes(8, "little")
    if data[8:16] != (digest if int.from_bytes(data[4:8], "little") & 1 else stamp):
        return None  # stale: the source changed since (hash-based: its hash; else its mtime and size, as import checks)
    try:
        code = marshal.loads(data[16:])
    except (EOFError, ValueError, TypeError):
        return None
    return importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + digest + marshal.dumps(_named(code, name))


def _named(code: types.CodeType, name: str) -> types.CodeType:
    """`code` and the code it holds named `name` (the host's path would otherwise show in a target's tracebacks)."""
    consts = tuple(_named(c, name) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=name, co_consts=consts)


@functools.lru_cache(maxsize=None)
def stdin_line(part: str) -> bytes:
    """What `part` needs of the agent as the first line of a target's stdin, for the loader of `stdin_argv`."""
    return line_of(bundle(part))


def line_of(zipped: bytes) -> bytes:
    """The files of an agent's zip as the loader reads them on stdin: one marshalled dict {name: bytes} (format 2,
    which every python 3 reads), compressed, base64, a line. The loader then needs marshal and zlib, not zipfile
    (zipfile and what it imports: 16 M instructions of each part's start on a target, a tenth of a `stop`)."""
    import zipfile  # here: see bundle
    with zipfile.ZipFile(io.BytesIO(zipped)) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    return base64.b64encode(zlib.compress(marshal.dumps(files, 2), 9)) + b"\n"


def here_argv(python: str, part: str, *args: str, site: bool = True) -> list[str]:
    """Run `part` of the agent under `python` on this machine, from this package's folder. Without `site` the
    interpreter starts with -S: a part that needs the standard library alone (the recorder) skips the
    site-packages' .pth files, 0.1 s of a start in a venv with editable installs."""
    return [python, *(() if site else ("-S",)), str(AGENT_DIR), part, *args]


def stdin_argv(python: str, part: str, *args: str) -> list[str]:
    """Run `part` of the agent under a target's `python`; its stdin must begin with `stdin_line()`. With -S, as
    the recorder starts: every part needs the standard library alone (tests/test_shipped_sources.py holds their
    imports to it) and starts whatever else runs (a probe, py-spy, the job's ping) as a fresh process of its own,
    which -S does not reach. The site module and the .pth files of the target's site-packages were 10 M of a bare
    start's 31 M instructions; a venv's editable installs or an injected .pth import far more."""
    return [python, "-S", "-c", LOADER.read_text(), part, *args]


@functools.lru_cache(maxsize=1)
def ship_script() -> str:
    """ship.sh, its header comment left out, its marks filled in (see the file)."""
    lines = (AGENT_DIR / "ship.sh").read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "".join(lines)
    for word, value in (("RUN_DIR_MARK", RUN_DIR_MARK), ("PID_MARK", PID_MARK), ("PY_MARK", PY_MARK),
                        ("END_MARK", END_MARK), ("MARKER_NAME", MARKER), ("MARKER_TEXT", MARKER_TEXT),
                        ("JOB_UMASK_NAME", JOB_UMASK)):
        text = text.replace(word, value)
    return text


@functools.lru_cache(maxsize=1)
def detach_code() -> str:
    """detach.py's code, its comment lines left out: the program of `python -c CODE LOG CMD...`."""
    return "".join(l for l in (AGENT_DIR / "detach.py").read_text().splitlines(keepends=True)
                   if not l.startswith("#"))
