"""Every line README.md and docs/*.md give to install dfdoctor works as written on a fresh machine (the name the
package index will have, `dfdoctor-launch`, is not published yet, so a line naming it would fail there).

Each line runs as the doc shows it, in bash, in a copy of the checkout (a git repository of the tracked files, so
the `git+` URL of docs/ci.md can name it), with a fresh venv's `bin` first on PATH (`python -m venv --without-pip`,
then the wheelhouse's pip as pip installs it: copied from a venv given it once per session; no site packages of any
other environment), and must leave a `dfdoctor` on PATH, outside the checkout's own venv, whose `--version`
answers. What keeps it fast and offline after the first run: pip takes every distribution from a wheelhouse that
`pip download` fills once per session (from pip's cache after the first time) with the versions
requirements-run.txt pins, through PIP_NO_INDEX and PIP_FIND_LINKS in the environment, and does not byte-compile
what it installs (PIP_COMPILE=0); the line itself is not changed."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from support.doc_commands import DOCS, commands
from support import wheelhouse as support_wheelhouse
from support.made_once import made_once, session_folder

pytestmark = pytest.mark.slow

_INSTALLS = re.compile(r"\b(pipx?\s+install|make\s+dist)\b")
# Install lines of the docs that do not install dfdoctor, and why they are not run here.
NOT_DFDOCTOR = {
    "pip install -r requirements.txt": "the user's job's own requirements, a CI step before dfdoctor's",
}
# The user's own values in an install line, and what stands in for them here.
GIT_URL = "YOUR_DFDOCTOR_GIT_URL"


def install_lines() -> list:
    return [c for c in commands() if _INSTALLS.search(c.text) and c.text not in NOT_DFDOCTOR]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    return support_wheelhouse.wheelhouse(tmp_path_factory)


@pytest.fixture(scope="module")
def venv_with_pip(tmp_path_factory, wheelhouse) -> Path:
    """A venv made as each test's fresh venv is (`_venv_with_pip`), once per session: what pip put in it is copied
    into each test's venv (`_fresh_venv`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return made_once(session_folder(tmp_path_factory) / "install-venv-with-pip", lambda v: _venv_with_pip(v, env))


def _committed_copy(where: Path) -> None:
    """The tracked files as they are now (edits included), committed in a repository of their own at `where`."""
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, where / name)
    git = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "checkout"], check=True)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """`_committed_copy`, made once per session (1,200 files copied, then `git add` and `commit`: ~0.65 CPU-s, which
    each worker that ran a line paid), then copied whole (`cp -a`, ~0.3 CPU-s) for each worker: the lines build in
    it (build/, *.egg-info, dist/), and the workers run theirs at the same time."""
    made = made_once(session_folder(tmp_path_factory) / "install-checkout", _committed_copy)
    where = tmp_path_factory.mktemp("checkout") / "dfdoctor"
    subprocess.run(["cp", "-a", str(made), str(where)], check=True)
    return where


def test_the_docs_show_each_way_to_install() -> None:
    shown = {c.text for c in install_lines()}
    for way in ("pip install .", "pip install -e .", "pipx install ."):
        assert way in shown
    assert any(t.startswith("make dist && pip install dist/") for t in shown)
    for doc in DOCS:  # the unpublished name is said to fail, never offered as the line to run
        for line in doc.read_text().splitlines():
            if "install dfdoctor-launch" in line:
                assert "not on the package index" in line or "No matching distribution" in line, line


def _venv_with_pip(venv: Path, env: dict) -> None:
    """The user's fresh venv, which is not the line under test: made without pip, then pip (the wheelhouse's)
    installed into it by this interpreter's pip (`pip --python`, as the Makefile makes .venv). `python -m venv`'s
    ensurepip took about twice the CPU (it also puts in a setuptools, which no line here uses: pip builds
    dfdoctor in an isolated environment, with the wheelhouse's setuptools, as in a venv of Python 3.12 on)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                    "pip"], env=env, check=True, timeout=300)
    assert (venv / "bin" / "pip").exists(), "the fresh venv has no pip"


def _site(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def _fresh_venv(venv: Path, model: Path) -> None:
    """The venv `_venv_with_pip` makes, for a tenth of its CPU: made here without pip, then given the files that
    pip's install of itself put into `model` (pip and its compiled modules, its dist-info, its scripts), the
    scripts' `#!` line and their RECORD rows rewritten for this venv as pip writes them for its own. pip's install
    of itself, compiling its 800 modules, was 2 of a `pip install .` test's 6 CPU-s."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bare = {p.name for p in _site(venv).iterdir()}
    for part in _site(model).iterdir():
        if part.name not in bare:
            shutil.copytree(part, _site(venv) / part.name, symlinks=True)
    scripts = {}
    for script in (model / "bin").iterdir():
        if not (venv / "bin" / script.name).exists():
            text = script.read_bytes().replace(bytes(model), bytes(venv))
            (venv / "bin" / script.name).write_bytes(text)
            (venv / "bin" / script.name).chmod(script.stat().st_mode)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text).digest()).rstrip(b"=").decode()
            scripts[f"../../../bin/{script.name}"] = f"sha256={digest},{len(text)}"
    (record,) = _site(venv).glob("pip-*.dist-info/RECORD")
    rows = record.read_bytes().decode()  # pip writes it with "\r\n", which read_text would change
    for name, row in scripts.items():
        rows, found = re.subn(rf"^{re.escape(name)},[^\r\n]*", f"{name},{row}", rows, flags=re.M)
        assert found == 1, f"{record} has no row {name}"
    record.write_bytes(rows.encode())
    assert (venv / "bin" / "pip").exists(), "the fresh venv has no pip"


@pytest.mark.parametrize("line", install_lines(), ids=lambda c: f"{c.doc}:{c.line}")
def test_each_install_line_works_in_a_fresh_venv(line, checkout, wheelhouse, venv_with_pip, tmp_path) -> None:
    venv = tmp_path / "venv"
    pipx_bin = tmp_path / "pipx-bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=f"{venv / 'bin'}:{pipx_bin}:/usr/local/bin:/usr/bin:/bin", PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(wheelhouse), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIPX_HOME=str(tmp_path / "pipx-home"), PIPX_BIN_DIR=str(pipx_bin), HOME=str(tmp_path),
               PIP_COMPILE="0")
    # pip byte-compiles each file it installs, and what a line proves does not need it: pip never fails an
    # install for a file it could not compile (it logs that at debug level only), and Python compiles on import
    # what `dfdoctor --version` runs, as it does each module the user runs later. PIP_COMPILE=0 is `--compile`
    # off for the pip the line runs, the pip pipx runs and their build environments; not for ensurepip (docs/ci.md's
    # `python -m venv` drops the PIP_ variables), nor for the fresh venv's own pip (installed compiled, as a user's
    # is). PIP_NO_COMPILE=1 would not do it: pip sets --no-compile's destination, `compile`, to the variable's truth.
    _fresh_venv(venv, venv_with_pip)
    text = line.text.replace(GIT_URL, f"file://{checkout}")
    text = text.replace("/tmp/dfdoctor/", f"{tmp_path}/ci-venv/").replace("/tmp/dfdoctor ", f"{tmp_path}/ci-venv ")
    if "pipx" in text:  # pipx is the user's own tool: installed here the way its docs say, into the fresh venv
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "pipx"], env=env, check=True, timeout=300)
    done = subprocess.run(["bash", "-c", text], cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{line.doc}:{line.line} `{line.text}` failed:\n{done.stdout}\n{done.stderr}"
    found = shutil.which("dfdoctor", path=f"{tmp_path}/ci-venv/bin:{env['PATH']}")
    assert found and Path(found).is_relative_to(tmp_path), f"`{line.text}` left no dfdoctor command: {found}"
    version = subprocess.run([found, "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("dfdoctor, version "), version


def test_the_action_sample_names_a_ref_that_exists() -> None:
    """docs/ci.md's `uses: YOUR_ORG/dfdoctor@REF` names a branch, tag or commit of this repository (it named a tag
    v0.1.0 that no one had made)."""
    refs = re.findall(r"uses: YOUR_ORG/dfdoctor@(\S+)", (REPO / "docs" / "ci.md").read_text())
    assert refs
    for ref in refs:
        known = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                               capture_output=True)
        branches = subprocess.run(["git", "-C", str(REPO), "branch", "-a", "--format=%(refname:lstrip=-1)"],
                                  capture_output=True, text=True).stdout.split()
        assert known.returncode == 0 or ref in branches, f"docs/ci.md: no ref {ref} in this repository"
