"""Typos in imports are typos (issue 43 item 1): the installed name is offered, the typo is never installed.

Real scripts, run by imports.smoke's probe and by `dfdoctor launch` in the test's own interpreter (which has
torch and numpy installed): what is near a missing name is observed there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dfdoctor import Status, causes
from dfdoctor.checks.imports_smoke import imports_smoke
from dfdoctor.context import Context
from support.torch_imports import torch_version

PY = sys.executable


def smoke(proj: Path, script: str = "train.py"):
    ctx = Context(command=[PY, script], cwd=proj, python=PY, env={"PATH": "/usr/bin:/bin"}, timeout=90)
    return [r for r in imports_smoke.run(ctx) if r.status is not Status.OK]


def project(tmp_path: Path, code: str, **files: str) -> Path:
    (tmp_path / "train.py").write_text(code)
    for name, text in files.items():
        (tmp_path / name.replace("__", ".")).write_text(text)
    return tmp_path


def test_a_mistyped_module_offers_the_installed_one_and_never_installs_the_typo(tmp_path: Path) -> None:
    import numpy
    proj = project(tmp_path, "import numpyy as np\n")
    (r,) = smoke(proj)
    assert (r.status, r.cause) == (Status.FAIL, causes.MISSING_MODULE)
    assert r.summary.endswith(f"did you mean `numpy` (installed, {numpy.__version__})?"), r.summary
    assert "train.py:1" in r.fix and "pip install numpyy" in r.fix and "does not offer" in r.fix
    assert "-m pip install" not in r.fix
    # the same import where the project declares the name: it is installed as the project declares it
    (tmp_path / "declared").mkdir()
    (r,) = smoke(project(tmp_path / "declared", "import numpyy as np\n", requirements__txt="numpyy==1.0\n"))
    assert "did you mean" not in r.summary
    assert "-m pip install numpyy==1.0" in r.fix and "requirements.txt:1 names it" in r.fix


def test_a_name_nothing_installed_is_close_to_says_the_install_was_not_tried(tmp_path: Path) -> None:
    proj = project(tmp_path, "import qwzxv_not_anywhere\n")
    (r,) = smoke(proj)
    assert "did you mean" not in r.summary
    assert "-m pip install qwzxv-not-anywhere" in r.fix and "not tried" in r.fix


def test_a_name_a_module_lacks_is_an_import_error_naming_the_close_one(tmp_path: Path) -> None:
    proj = project(tmp_path, "import os\nfrom collections import OrderdDict\n")
    (r,) = smoke(proj)
    assert (r.status, r.cause) == (Status.FAIL, causes.IMPORT_ERROR)
    assert "collections has no `OrderdDict`; did you mean `OrderedDict`?" in r.summary
    assert f"({proj / 'train.py'}:2)" in r.summary and "pip" not in r.fix


def test_pyproject_and_readme_install_lines_declare_names(tmp_path: Path) -> None:
    from dfdoctor import project as model
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["Numpyy>=1"]\n'
                                             '[project.optional-dependencies]\nlog = ["wandbb"]\n')
    (tmp_path / "README.md").write_text("```\npip install torchh\n```\n")
    proj = model.read([], tmp_path, script=str(project(tmp_path, "import os\n") / "train.py"))
    assert proj.install.declares("numpyy") == "pyproject.toml"
    assert proj.install.declares("wandbb.sdk") == "pyproject.toml"
    assert proj.install.declares("torchh") == "README.md:2"
    assert proj.install.declares("torch") is None


@pytest.mark.slow
def test_torch_typos_the_issue_names(tmp_path: Path) -> None:
    proj = project(tmp_path, "import torchh as torch\nimport torch.nn.functionl as F\n"
                             "from torch.utils.data import DataLoder\n")
    by_line = {r.evidence[0].split(":")[1]: r for r in smoke(proj)}
    assert by_line["1"].summary.endswith(f"did you mean `torch` (installed, {torch_version()})?")
    assert "-m pip install" not in by_line["1"].fix
    assert by_line["2"].cause == causes.MISSING_MODULE
    assert "did you mean `torch.nn.functional`" in by_line["2"].summary and "pip" not in by_line["2"].fix
    assert by_line["3"].cause == causes.IMPORT_ERROR  # not dependency-mismatch with a reinstall
    assert "torch.utils.data has no `DataLoder`; did you mean `DataLoader`?" in by_line["3"].summary
    assert "pip" not in by_line["3"].fix


@pytest.mark.slow
def test_the_launch_verdict_says_the_same(dfdoctor, tmp_path: Path) -> None:
    project(tmp_path, "import numpyy\n")
    (tmp_path / "t2.py").write_text("from collections import OrderdDict\n")
    res = dfdoctor("launch", "--no-check", "--format", "json", "--", PY, "train.py", cwd=tmp_path)
    v = json.loads(res.stdout)["verdict"]
    assert v["cause"] == causes.MISSING_MODULE and "did you mean `numpy` (installed," in v["summary"]
    assert "train.py:1" in v["fix"] and "-m pip install" not in v["fix"]
    res = dfdoctor("launch", "--no-check", "--format", "json", "--", PY, "t2.py", cwd=tmp_path)
    v = json.loads(res.stdout)["verdict"]
    assert v["cause"] == causes.IMPORT_ERROR
    assert "collections has no `OrderdDict`; did you mean `OrderedDict`? (t2.py:1)" in v["summary"]


def test_a_name_absent_from_the_installed_version_is_a_mismatch_only_where_a_pin_disagrees(tmp_path: Path) -> None:
    import numpy
    (tmp_path / "free").mkdir()
    (r,) = smoke(project(tmp_path / "free", "from numpy import NoSuchThingAtAll\n"))
    assert (r.status, r.cause) == (Status.FAIL, causes.IMPORT_ERROR)
    assert f"numpy has no `NoSuchThingAtAll`, and no name close to it, in the installed numpy {numpy.__version__}" \
        in r.summary
    assert "pins no version" in r.fix and "pip" not in r.fix
    (tmp_path / "pinned").mkdir()
    (r,) = smoke(project(tmp_path / "pinned", "from numpy import NoSuchThingAtAll\n",
                         requirements__txt="numpy==1.26.4\n"))
    assert r.cause == causes.DEPENDENCY_MISMATCH  # the project pins another numpy than the installed one


def test_dfdoctors_own_active_venv_shadowing_the_jobs_python_is_said(tmp_path: Path) -> None:
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment")
    (tmp_path / "train.py").write_text("import qwzxv_not_anywhere\n")
    ctx = Context(command=["python", "train.py"], cwd=tmp_path, python=PY, timeout=90,
                  env={"PATH": f"{Path(PY).parent}:/usr/bin:/bin", "VIRTUAL_ENV": sys.prefix})
    (r,) = [r for r in imports_smoke.run(ctx) if r.status is not Status.OK]
    assert f"is dfdoctor's own virtual environment ({sys.prefix})" in r.fix and "`deactivate`" in r.fix
    (r,) = smoke(tmp_path)  # no venv active: no such note
    assert "dfdoctor's own" not in r.fix


def test_a_real_distribution_beside_a_standard_module_is_not_taken_for_a_typo() -> None:
    import importlib.util
    spec = importlib.util.spec_from_file_location("_near_under_test",
                                                  Path(__file__).resolve().parent.parent / "checks/probes/_near.py")
    near = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(near)
    assert near.close("timm", {"time", "torch", "tempfile"}) == []  # timm is a model library, not `time`
    assert near.close("torchh", {"time", "torch"}) == ["torch"]
    assert near.close("Torch", {"torch", "torchvision"}) == ["torch"]


def test_only_the_projects_own_lines_are_read_as_typos(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "site-packages" / "fakelib_dfd"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("import numpyy\n")  # an installed library's own import: not the job's typo
    proj = tmp_path / "proj"
    (proj / "mypkg").mkdir(parents=True)
    (proj / "mypkg" / "__init__.py").write_text("import os\nimport numpyy\n")  # the project's module: its typo
    (proj / "train.py").write_text("import fakelib_dfd\n")
    (proj / "t2.py").write_text("import mypkg\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site.parent)}
    ctx = Context(command=[PY, "train.py"], cwd=proj, python=PY, env=env, timeout=90)
    (r,) = [r for r in imports_smoke.run(ctx) if r.status is not Status.OK]
    assert "(needed by fakelib_dfd)" in r.summary and "did you mean" not in r.summary
    assert "nothing installed there has a name close" not in r.fix  # it was not looked at: not claimed
    ctx = Context(command=[PY, "t2.py"], cwd=proj, python=PY, env=env, timeout=90)
    (r,) = [r for r in imports_smoke.run(ctx) if r.status is not Status.OK]
    assert "did you mean `numpy` (installed," in r.summary
    assert r.fix.startswith(f"Fix the import at {proj / 'mypkg' / '__init__.py'}:2:"), r.fix


def checked(dfdoctor, proj: Path, script: str = "train.py") -> tuple[dict, dict[str, dict]]:
    """A real `dfdoctor check --format json` of the project: its verdict, and imports.smoke's results by line."""
    res = dfdoctor("check", "--format", "json", "--python", PY, "--", PY, script, cwd=proj)
    report = json.loads(res.stdout)
    (smoke,) = [c for c in report["checks"] if c["id"] == "imports.smoke"]
    return report["verdict"], {f["evidence"][0].split(":")[1]: f for f in smoke["findings"] or [smoke]}


def test_a_typo_of_a_declared_requirement_that_is_not_installed_names_it_and_never_the_typo(
        dfdoctor, tmp_path: Path) -> None:
    import importlib.util
    if importlib.util.find_spec("sklearn") is not None:
        pytest.skip("scikit-learn is installed here: `sklean` would be a typo of an installed name")
    # qwzxvision and qwzxexact: declared, installed nowhere (torchvision in requirements.txt, not yet installed)
    project(tmp_path, "import qwzxvison\nimport sklean\nimport qwzxexact\nimport numpyy\n",
            requirements__txt="qwzxvision==1.0\nscikit-learn>=1\nqwzxexact\nnumpyx\n")
    verdict, by_line = checked(dfdoctor, tmp_path)
    line = f"`{PY} -m pip install -r {tmp_path / 'requirements.txt'}` (its requirements.txt; dfdoctor did not try"
    typo = by_line["1"]
    assert typo["cause"] == causes.MISSING_MODULE
    assert typo["summary"].endswith("did you mean `qwzxvision` (declared in requirements.txt:1, not installed)?")
    assert typo["fix"].startswith(f"Fix the import at {tmp_path / 'train.py'}:1: did you mean `qwzxvision`")
    assert line in typo["fix"] and "pip install qwzxvison" not in typo["fix"]
    assert typo["summary"] in verdict["summary"] and verdict["fix"] == typo["fix"]  # the JSON's verdict: the same
    pair = by_line["2"]  # the import name the distribution is known by, not the distribution's name
    assert pair["summary"].endswith(
        "did you mean `sklearn` (of `scikit-learn`, declared in requirements.txt:2, not installed)?")
    assert line in pair["fix"] and "pip install sklean" not in pair["fix"]
    exact = by_line["3"]  # exactly what the project declares: a missing install, installed as declared
    assert "did you mean" not in exact["summary"] and "Fix the import" not in exact["fix"]
    assert f"{PY} -m pip install qwzxexact   (requirements.txt:3 names it)" in exact["fix"]
    # an installed name closer than the declared one (numpy, beside numpyx declared) is still the one meant
    assert "did you mean `numpy` (installed," in by_line["4"]["summary"], by_line["4"]["summary"]


def test_a_typo_of_a_pyproject_dependency_names_it_with_the_projects_install_line(dfdoctor, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\ndependencies = [\n'
                                             '  "qwzxvision>=1",\n]\n[project.optional-dependencies]\n'
                                             'img = ["qwzx-pixels"]\n')
    project(tmp_path, "import os\nimport qwzxvison\nimport qwzx_pixel\n")
    _, by_line = checked(dfdoctor, tmp_path)
    assert by_line["2"]["summary"].endswith("did you mean `qwzxvision` (declared in pyproject.toml:5, not installed)?")
    assert f"`{PY} -m pip install -e {tmp_path}` (its pyproject.toml; dfdoctor did not try" in by_line["2"]["fix"]
    assert "pip install qwzxvison" not in by_line["2"]["fix"]
    assert by_line["3"]["summary"].endswith(
        "did you mean `qwzx_pixels` (of `qwzx-pixels`, declared in pyproject.toml:8, not installed)?")
    assert f"-m pip install -e '{tmp_path}[img]'" in by_line["3"]["fix"]


@pytest.mark.slow
def test_a_launch_that_died_of_a_declared_requirements_typo_says_the_same(dfdoctor, tmp_path: Path) -> None:
    project(tmp_path, "import qwzxvison\n", requirements__txt="qwzxvision==1.0\n")
    _, by_line = checked(dfdoctor, tmp_path)
    res = dfdoctor("launch", "--no-check", "--format", "json", "--", PY, "train.py", cwd=tmp_path)
    v = json.loads(res.stdout)["verdict"]
    assert v["cause"] == causes.MISSING_MODULE
    assert v["summary"].endswith(": did you mean `qwzxvision` (declared in requirements.txt:1, not installed)?")
    # the same words as check's, but for the job's line (check names it by its full path)
    assert v["fix"] == by_line["1"]["fix"].replace(f"{tmp_path}/train.py:1", "train.py:1")
    assert "pip install qwzxvison" not in v["fix"]
