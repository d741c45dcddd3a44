"""The wheels that installing this checkout takes (dfdoctor's dependencies at the versions requirements-run.txt
pins and its build backend), plus pipx and pip, downloaded once per run of the suite (`pip download`: from pip's
cache after the first time) into a folder its xdist workers share. A test that installs the checkout points pip
at it (PIP_NO_INDEX, PIP_FIND_LINKS: `OFFLINE`) instead of the package index: the install line stays as written,
and no index is asked the same questions again in each test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO
from support.made_once import made_once, session_folder

NAMES = ("click", "psutil", "jinja2", "markupsafe", "packaging", "py-spy", "setuptools", "wheel")


def pins() -> list[str]:
    out = []
    for line in (REPO / "requirements-run.txt").read_text().splitlines():
        name = line.split("==")[0].strip().lower()
        if "==" in line and name in NAMES:
            out.append(line.strip())
    assert len(out) == len(NAMES), out
    return out


def wheelhouse(tmp_path_factory) -> Path:
    def download(where: Path) -> None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(where), *pins(), "pipx",
                        "pip"], check=True, timeout=300)
    return made_once(session_folder(tmp_path_factory) / "install-wheelhouse", download)


def offline(where: Path) -> dict:
    """pip's settings for an install from the wheelhouse alone. PIP_COMPILE=0: pip does not byte-compile what it
    installs (in the build environment too), which an install line does not need to work (Python compiles on
    import what then runs); PIP_NO_COMPILE=1 would not do it (pip sets `compile` to the variable's truth)."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(where), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_COMPILE": "0"}
