"""The minimal PEP 440/508 fallback agrees with `packaging` on the cases requirements files actually contain."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "checks" / "probes"))
import _pep508  # noqa: E402

sys.path.pop(0)
# `packaging` (68 M instructions, callgrind) is imported by the tests, not when the file is collected: every pytest
# process collects it (test_collection_cost.py)

VERSIONS = ["0.9", "1.0", "1.0.0", "1.0.post1", "1.0rc1", "1.0a2", "1.0b1", "1.0.dev3", "1.0rc1.dev2", "1.1",
            "1.2.3", "2.0", "2.13.0", "2.13.0+cpu", "2.13.0+cu126", "2.13.1", "3.0.0rc2", "1!0.5", "2024.10.0",
            "1.26.4", "0.4.5", "1.0-1", "1.0.post1.dev1"]
SPECS = ["", ">=1.0", "<2", "<=1.0", ">1.0", "==1.0", "==1.0.*", "!=1.0.*", "~=1.0", "~=1.2.3", "==2.13.0",
         "!=2.13.0", ">=2.4,<2.14", "<3", ">=1.0rc1", "==2.13.0+cpu", "===1.0", ">1.0.post1", "<1.0rc2",
         ">=1!0.1", "~=2.13", "==2.*", ">2.13.0"]
MARKERS = ['python_version >= "3.9"', "python_version < '3.10'", 'sys_platform == "linux"',
           'platform_machine == "x86_64" and platform_system == "Linux"',
           'platform_system == "Windows" or (python_version >= "3.8" and os_name == "posix")',
           'extra == "streaming"', 'extra == "Stream_ing"', '"linux" in sys_platform',
           'platform_machine not in "arm64 aarch64"', 'implementation_name == "cpython"',
           'python_full_version >= "3.11.0"', "platform_release != ''"]
REQS = ["torch>=2.4", "numpy", "datasets[streaming,audio]>=2.18", "safetensors==0.4.5",
        'triton==3.5.0; platform_system == "Linux" and platform_machine == "x86_64"',
        "my-lib @ https://example.invalid/my_lib-1.0.tar.gz", "my_lib @ file:///tmp/x.whl ; python_version >= '3.8'",
        "Foo.Bar_baz (>=1.0,<2)", "tokenizers<0.20,>=0.19"]


@pytest.mark.parametrize("spec", SPECS)
def test_specifiers_agree(spec: str) -> None:
    from packaging.specifiers import SpecifierSet
    ours, theirs = _pep508.SpecifierSet(spec), SpecifierSet(spec)
    for v in VERSIONS:
        assert ours.contains(v, prereleases=True) == theirs.contains(v, prereleases=True), (spec, v)


def test_version_order_agrees() -> None:
    from packaging.version import Version
    ours = sorted(VERSIONS, key=lambda v: _pep508.Version(v).key())
    theirs = sorted(VERSIONS, key=Version)
    assert [str(Version(v)) for v in ours] == [str(Version(v)) for v in theirs]


@pytest.mark.parametrize("marker", MARKERS)
def test_markers_agree(marker: str) -> None:
    from packaging.markers import Marker
    for extra in ("", "streaming", "stream-ing"):
        assert _pep508.Marker(marker).evaluate({"extra": extra}) == Marker(marker).evaluate({"extra": extra}), (marker, extra)


@pytest.mark.parametrize("text", REQS)
def test_requirements_agree(text: str) -> None:
    from packaging.requirements import Requirement
    ours, theirs = _pep508.Requirement(text), Requirement(text)
    assert ours.name == theirs.name and ours.extras == theirs.extras and ours.url == theirs.url
    assert str(_pep508.SpecifierSet(str(theirs.specifier))) == str(ours.specifier)
    assert (ours.marker is None) == (theirs.marker is None)
    if ours.marker is not None:
        assert ours.marker.evaluate({"extra": ""}) == theirs.marker.evaluate({"extra": ""})


@pytest.mark.parametrize("bad", ["bad req !!", "numpy >= ", "x; python_version >>> '3'", "x; foo == 'bar'",
                                 "x; (python_version == '3'", "y @ "])
def test_invalid_input_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        _pep508.Requirement(bad)
