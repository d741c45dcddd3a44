"""The wheel adds exactly one top-level name, `dfdoctor`, and works from a project that has its own `checks/`,
`trainer/`, `templates/` and `doctor/` packages on PYTHONPATH (common in ML repositories)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

USER_PACKAGES = ("checks", "trainer", "templates", "doctor")


def _site_packages(prefix: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[Path, set[str]]:
    """A fresh venv with only the built wheel installed; dfdoctor's dependencies come from the test venv through a
    path entry (a path in a .pth file is appended to sys.path; the .pth files inside it are not run, so the test
    venv's editable install of dfdoctor stays out)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(work / "dist"), str(src)], check=True, capture_output=True, timeout=300)
    (wheel,) = (work / "dist").glob("dfdoctor_launch-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = _site_packages(env_dir)
    before = {p.name for p in site.iterdir()}
    # --no-compile: the .pyc pip would write are no top-level name and no file of the wheel, and the tests' runs of
    # dfdoctor compile what they import (0.6 to 0.9 CPU-s less of this fixture's 4)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", "--no-compile", str(wheel)], check=True, capture_output=True,
                   timeout=300)
    added = {p.name for p in site.iterdir()} - before
    (site / "zz_test_deps.pth").write_text(str(_site_packages(Path(sys.prefix))) + "\n")
    return env_dir, added


def test_wheel_adds_one_top_level_name(wheel_venv) -> None:
    env_dir, added = wheel_venv
    assert {n for n in added if not n.endswith(".dist-info")} == {"dfdoctor"}, added
    assert len([n for n in added if n.endswith(".dist-info")]) == 1
    # every module of the repository is in it (setup.cfg lists the packages: a new subpackage must be added there)
    installed = _site_packages(env_dir) / "dfdoctor"
    for folder, inside in (("doctor", installed), ("checks", installed / "checks"), ("trainer", installed / "trainer"),
                           ("templates", installed / "templates")):
        for f in (REPO / folder).rglob("*"):
            if f.is_file() and f.suffix in (".py", ".j2", ".css", ".sh") and "__pycache__" not in f.parts:
                rel = f.relative_to(REPO / folder)
                if folder == "doctor" and rel.parts[0] in ("checks", "trainer", "templates"):
                    continue
                assert (inside / rel).is_file(), f"{folder}/{rel} is not in the wheel (add its package to setup.cfg)"


@pytest.fixture
def user_project(tmp_path) -> Path:
    """A project whose own packages are named like dfdoctor's folders, each importable and broken for us."""
    for name in USER_PACKAGES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"MINE = {name!r}\n")
    (tmp_path / "checks" / "data.py").write_text("def check_batch(b):\n    return b\n")
    (tmp_path / "train.py").write_text("import checks.data\nprint('training')\n")
    return tmp_path


def test_user_packages_do_not_shadow_ours(wheel_venv, user_project) -> None:
    env_dir, _ = wheel_venv
    env = dict(os.environ, PYTHONPATH=".", NO_COLOR="1")
    listing = subprocess.run([str(env_dir / "bin" / "dfdoctor"), "list-checks", "--format", "json"],
                             cwd=user_project, env=env, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    doc = json.loads(listing.stdout)
    assert doc["broken"] == []
    assert {c["id"] for c in doc["checks"]} >= {"imports.smoke", "log.writable", "compile.race", "cuda.init"}

    # The probes (package data) and the report template travel in the wheel and run from the user's folder.
    python = str(env_dir / "bin" / "python")
    res = subprocess.run([str(env_dir / "bin" / "dfdoctor"), "check", "--only", "imports.smoke",
                          "--only", "log.writable", "--log", "logs/train.log", "--format", "html",
                          "--output", "report.html", "--format", "json", "--output", "report.json",
                          "--", python, "train.py"],
                         cwd=user_project, env=env, capture_output=True, text=True, timeout=300)
    report = json.loads((user_project / "report.json").read_text())
    status = {c["id"]: (c["status"], c["cause"]) for c in report["checks"]}
    assert status["imports.smoke"] == ("ok", None), res.stdout + res.stderr
    assert status["log.writable"] == ("fail", "log-dir-missing")
    assert "log-dir-missing" in (user_project / "report.html").read_text()

    trainer = subprocess.run([python, "-m", "dfdoctor.trainer", "--help"], cwd=user_project, env=env,
                             capture_output=True, text=True, timeout=120)
    assert trainer.returncode == 0 and "--preset" in trainer.stdout, trainer.stderr
