"""deps_probe's module -> distributions map is `importlib.metadata.packages_distributions()`'s, exactly (same keys in
the same order, same lists), in every interpreter here that has that function: the dev venv (dfdoctor a strict
editable install), the system Pythons with their own site-packages, and each again with a site of the awkward
cases beside it (namespace package, .pth-only, editable, blank top_level.txt, duplicates, no Name, egg-info, a
dist claiming a standard-library name, a METADATA that does not decode). And each distribution's requirements
(`requires_of`) are `Distribution.requires`'s, on 3.8+ too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBES = Path(__file__).resolve().parent.parent / "checks" / "probes"
PYENV = Path("/root/.pyenv/versions")
PYTHONS = [sys.executable] + sorted((str(p / "bin" / "python") for p in PYENV.glob("3.*")
                                     if (p / "bin" / "python").exists() and p.name.split(".")[1] not in "67"),
                                    key=lambda p: [int(x) for x in Path(p).parent.parent.name.split(".")])

# Runs in the interpreter under test: the probe's map and the standard library's, both from the same sys.path.
# The probe's reaching for the standard library's function is counted: it must answer alone where it can.
COMPARE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import deps_probe
from importlib import metadata
real = getattr(metadata, "packages_distributions", None)  # 3.10+
calls = []
metadata.packages_distributions = lambda: calls.append(1) or real()
def outcome(fn):
    try:
        got = fn()
        return {"map": [[k, v] for k, v in got.items()]}
    except Exception as exc:
        return {"raised": type(exc).__name__}
every = []
first, _ = deps_probe.installed(every)
ours = outcome(lambda: deps_probe.module_distributions(every)) if real else None
fell_back = bool(calls)
theirs = outcome(real) if real else None
requires = [[e["name"], deps_probe.requires_of(e), list(e["dist"].requires or [])] for e in first.values()]
print(json.dumps({"ours": ours, "theirs": theirs, "fell_back": fell_back, "n": len(every), "requires": requires}))
"""


def _dist(site: Path, folder: str, files: dict[str, str | bytes]) -> None:
    d = site / folder
    d.mkdir(parents=True)
    for name, text in files.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())


def _awkward_sites(root: Path, broken: bool) -> list[Path]:
    """Two site folders of distributions written by hand, each kind the map must treat as the stdlib does."""
    one, two = root / "site1", root / "site2"
    _dist(one, "ns_dist-1.0.dist-info", {"METADATA": "Metadata-Version: 2.1\nName: ns-dist\nVersion: 1.0\n",
                                         "RECORD": "nspkg/sub/mod.py,,\nnspkg/sub/data.json,,\n"
                                                   "ns_dist-1.0.dist-info/METADATA,,\n"})
    _dist(one, "pthonly-1.0.dist-info", {"METADATA": "Name: pthonly\nVersion: 1.0\n",
                                         "RECORD": "pthonly.pth,,\npthonly-1.0.dist-info/RECORD,,\n"})
    _dist(one, "edit_me-0.1.dist-info", {"METADATA": "Name: edit-me\nVersion: 0.1\n",
                                         "RECORD": "__editable__.edit_me-0.1.pth,,\n"
                                                   "__editable___edit_me_0_1_finder.py,,\n",
                                         "direct_url.json": '{"url": "file:///x", "dir_info": {"editable": true}}'})
    _dist(one, "blank-1.0.dist-info", {"METADATA": "Name: blank\nVersion: 1.0\n", "top_level.txt": "\n",
                                       "RECORD": "blankmod.py,,\n\"odd,name/x.py\",,\n./dotted/y.py,,\n"})
    _dist(one, "dup-1.0.dist-info", {"METADATA": "Name: dup\nVersion: 1.0\n", "top_level.txt": "dupmod\n"})
    _dist(two, "dup-2.0.dist-info", {"METADATA": "Name: dup\nVersion: 2.0\n", "top_level.txt": "dupmod\n"})
    _dist(one, "anon-1.0.dist-info", {"METADATA": "Version: 1.0\n", "top_level.txt": "anonmod\n"})
    _dist(one, "old_egg-1.0.egg-info", {"PKG-INFO": "Name: old-egg\nVersion: 1.0\n",
                                        "SOURCES.txt": "setup.py\neggmod/__init__.py\n",
                                        "requires.txt": "dep1>=1\n\n[gpu]\ndep2\n\n[:python_version < '4']\ndep3\n"})
    _dist(one, "reqless-1.0.dist-info", {"METADATA": "Name: reqless\nVersion: 1.0\n",
                                         "requires.txt": "dep4\n"})
    _dist(two, "shadow-1.0.dist-info", {"METADATA": "Name: shadow\nVersion: 1.0\n", "top_level.txt": "os\nshadow\n"})
    _dist(two, "ext-1.0.dist-info", {"METADATA": "Name: ext\nVersion: 1.0\n",
                                     "RECORD": "extmod.cpython-311-x86_64-linux-gnu.so,,\nextpkg/__init__.py,,\n"})
    for site, path in ((one, "nspkg/sub/mod.py"), (two, "extpkg/__init__.py")):  # 3.12+ skip files not there
        (site / path).parent.mkdir(parents=True)
        (site / path).write_text("")
    if broken:
        _dist(two, "bad-1.0.dist-info", {"METADATA": b"Name: bad\nVersion: 1.0\nSummary: \xff\xfe\n",
                                         "top_level.txt": "badmod\n"})
    return [one, two]


def _compare(python: str, sites: list[Path]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if sites:
        env["PYTHONPATH"] = os.pathsep.join(map(str, sites))
    done = subprocess.run([python, "-c", COMPARE, str(PROBES)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("case", ["installed", "awkward", "broken"])
def test_map_is_packages_distributions(python, case, tmp_path):
    got = _compare(python, _awkward_sites(tmp_path, case == "broken") if case != "installed" else [])
    # the Requires-Dist of each distribution as `dist.requires` reads them (requires.txt where METADATA has none)
    assert [ours for _, ours, _ in got["requires"]] == [theirs for _, _, theirs in got["requires"]], got["requires"]
    if case == "awkward":
        reqs = {name: ours for name, ours, _ in got["requires"]}
        assert reqs["reqless"] == ["dep4"] and reqs["old-egg"][0] == "dep1>=1" and len(reqs["old-egg"]) == 3
    if got["theirs"] is None:  # Python < 3.10: no packages_distributions, the probe names no imported dist
        return
    assert got["ours"] == got["theirs"], (python, case)
    assert got["n"] > (0 if case == "installed" else 10)
    if case == "broken":
        # a METADATA that does not decode: the standard library answers (and raises, so the probe names none)
        assert got["fell_back"] and got["theirs"] == {"raised": "UnicodeDecodeError"}
    else:
        assert not got["fell_back"], "the map was the standard library's own, not the probe's"
    if case == "awkward":
        found = dict(got["ours"]["map"])
        # what each awkward kind maps to (identical to the standard library's, checked above): shown, not new
        assert found["dupmod"] == ["dup", "dup"] and found["anonmod"] == [None] and "os" in found
        if "3.10." not in python:
            assert found["nspkg"] == ["ns-dist"] and found["extpkg"] == ["ext"]


def test_dev_venv_holds_an_editable_install():
    """The comparison above covers a strict editable install in the dev venv (dfdoctor's own)."""
    site = Path(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    assert list(site.glob("__editable__.*.pth")) or list(site.glob("__editable__*finder.py")), list(site.iterdir())
