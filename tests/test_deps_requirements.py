"""deps.requirements against real interpreters: a throwaway venv per test, distributions described by real
dist-info metadata (what pip writes and importlib.metadata reads), requirements files as users write them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dfdoctor.checks.deps_requirements import read_requirements
from dfdoctor.checks.deps_requirements import deps_requirements
from dfdoctor import Status, causes
from dfdoctor.context import Context

BASE_PY = str(Path(sys.base_prefix) / "bin" / "python3")
PY39 = "/root/.pyenv/versions/3.9.18/bin/python"


def make_venv(where: Path, base: str = BASE_PY) -> tuple[str, Path]:
    """A real, empty virtual environment (no pip): its python and its site-packages."""
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True, timeout=60)
    site = next((where / "lib").glob("python3*/site-packages"))
    return str(where / "bin" / "python"), site


def install_dist(site: Path, name: str, version: str, requires: tuple[str, ...] = (),
                 top_level: tuple[str, ...] = ()) -> None:
    """Write a distribution's metadata as pip would; importlib.metadata then reports it installed."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    if top_level:
        (info / "top_level.txt").write_text("\n".join(top_level) + "\n")
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("pip\n")


def run_check(py: str, cwd: Path, requirements: tuple[Path, ...] = (), env: dict | None = None):
    ctx = Context(command=[py, "train.py"], cwd=cwd, python=py, requirements=list(requirements),
                  env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **(env or {})}, timeout=30)
    return deps_requirements.run(ctx)


def by_cause(results, cause):
    return [r for r in results if r.cause == cause]


@pytest.fixture
def venv(tmp_path: Path):
    py, site = make_venv(tmp_path / "venv")
    proj = tmp_path / "proj"
    proj.mkdir()
    return py, site, proj


def test_missing_mismatch_markers_extras_and_includes(venv) -> None:
    py, site, proj = venv
    install_dist(site, "numpy", "1.21.0")
    install_dist(site, "safetensors", "0.4.5")
    install_dist(site, "datasets", "2.19.0", ("pyarrow>=12", 'aiohttp; extra == "streaming"'))
    install_dist(site, "pyarrow", "15.0.0")
    (proj / "requirements.txt").write_text(
        "# drafter deps\n"
        "numpy>=1.26  # needs the new RNG\n"
        "safetensors==0.4.5 \\\n"
        "    --hash=sha256:abc123\n"
        "datasets[streaming]>=2.18\n"
        "einops>=0.7\n"
        "uvloop; sys_platform == 'win32'\n"
        "-r more.txt\n"
        "-c constraints.txt\n"
        "-e .\n"
        "--extra-index-url https://example.invalid/simple\n")
    (proj / "more.txt").write_text("pyarrow<15\n")
    (proj / "constraints.txt").write_text("tensorboard==2.16\nnumpy<3\n")
    results = run_check(py, proj)
    missing = {r.summary.split()[0] for r in by_cause(results, causes.DEPENDENCY_MISSING)}
    mismatch = by_cause(results, causes.DEPENDENCY_MISMATCH)
    assert missing == {"einops", "aiohttp"}  # aiohttp: pulled in by datasets[streaming]
    texts = " | ".join(r.summary for r in mismatch)
    assert "numpy 1.21.0 is installed, but requirements.txt:2 requires numpy>=1.26" in texts
    assert "pyarrow 15.0.0 is installed, but more.txt:1 requires pyarrow<15" in texts
    assert "uvloop" not in texts and "tensorboard" not in " ".join(r.summary for r in results)  # marker false; constraint only
    assert all(r.status is Status.FAIL for r in missing and by_cause(results, causes.DEPENDENCY_MISSING))
    data = results[0].data["requirements"]
    assert {d["name"]: d["status"] for d in data}["uvloop"] == "not-applicable"
    assert any(r.fix.endswith("'numpy>=1.26'") and py in r.fix for r in mismatch)


def test_pyproject_dependencies_and_explicit_requirements(venv, tmp_path: Path) -> None:
    py, site, proj = venv
    install_dist(site, "click", "8.1.7")
    (proj / "pyproject.toml").write_text('[project]\nname = "drafter"\ndependencies = ["click>=8", "rich>=13"]\n')
    extra = tmp_path / "gpu-requirements.txt"
    extra.write_text("triton>=3\n")
    results = run_check(py, proj, requirements=(extra,))
    missing = sorted(r.summary.split()[0] for r in by_cause(results, causes.DEPENDENCY_MISSING))
    assert missing == ["rich", "triton"]
    assert any("pyproject.toml [project] dependencies" in r.summary for r in results)


def test_all_satisfied_is_ok(venv) -> None:
    py, site, proj = venv
    install_dist(site, "numpy", "2.1.0")
    (proj / "requirements.txt").write_text("numpy>=1.26,<3\nfoo; python_version < '3.0'\n")
    results = run_check(py, proj)
    assert [r.status for r in results] == [Status.OK]
    assert "1 requirement(s) from requirements.txt satisfied" in results[0].summary
    assert "1 not applicable" in results[0].summary


def test_torch_pins_checked_without_any_requirements_file(venv) -> None:
    py, site, proj = venv
    install_dist(site, "torch", "2.13.0", ('triton==3.5.0; platform_system == "Linux"', "sympy>=1.13.3",
                                            "filelock", 'optree>=0.13.0; extra == "optree"'))
    install_dist(site, "triton", "3.4.0")
    install_dist(site, "filelock", "3.16.0")
    results = run_check(py, proj)
    mism = by_cause(results, causes.DEPENDENCY_MISMATCH)
    miss = by_cause(results, causes.DEPENDENCY_MISSING)
    assert any(r.status is Status.FAIL and "torch 2.13.0 requires triton==3.5.0, but triton 3.4.0 is installed" in r.summary
               for r in mism)
    assert any(r.status is Status.FAIL and "torch 2.13.0 requires sympy>=1.13.3, which is not installed" in r.summary
               for r in miss)
    assert not any("optree" in r.summary for r in results)  # an extra nobody asked for is not required


def test_conflicts_outside_the_jobs_dependencies_are_a_note_of_the_ok_line(venv) -> None:
    """Not a warning (on a remote target they came from the distribution's own packages, and the warning's
    `pip check` fix led the headline): counted in the ok line, listed in its details, no fix."""
    py, site, proj = venv
    install_dist(site, "numpy", "2.1.0")
    install_dist(site, "old-plotting-tool", "0.3", ("numpy<2",))
    (proj / "requirements.txt").write_text("numpy>=2\n")
    results = run_check(py, proj)
    assert not by_cause(results, causes.DEPENDENCY_MISMATCH)
    (line,) = results
    assert line.status is Status.OK and not line.fix
    assert "1 conflict(s) among distributions the job does not use" in line.summary
    assert "old-plotting-tool 0.3 requires numpy<2, but numpy 2.1.0 is installed" in line.details


def test_conflict_inside_the_jobs_dependencies_fails(venv) -> None:
    py, site, proj = venv
    install_dist(site, "transformers", "4.40.0", ("tokenizers<0.20,>=0.19",))
    install_dist(site, "tokenizers", "0.21.0")
    (proj / "requirements.txt").write_text("transformers\n")
    results = run_check(py, proj)
    (r,) = by_cause(results, causes.DEPENDENCY_MISMATCH)
    assert r.status is Status.FAIL and "transformers 4.40.0 requires tokenizers<0.20,>=0.19" in r.summary


def test_duplicate_installs_on_sys_path_warn(venv, tmp_path: Path) -> None:
    py, site, proj = venv
    install_dist(site, "numpy", "2.1.0")
    shadow = tmp_path / "shadow"
    install_dist(shadow, "numpy", "1.24.0")
    results = run_check(py, proj, env={"PYTHONPATH": str(shadow)})
    (dup,) = [r for r in results if "more than once" in r.summary]
    assert dup.status is Status.WARN and "1.24.0" in dup.evidence[0] and "2.1.0" in dup.evidence[0]


def test_real_torch_in_the_project_venv() -> None:
    """The interpreter dfdoctor's own tests run in has a real torch: its pins hold, and torch>=3 does not."""
    proj = Path(__file__).resolve().parent / "samples" / "imports_ok"
    results = run_check(sys.executable, proj)
    assert [r.status for r in results if r.status not in (Status.OK,)] in ([], [Status.WARN])
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        req = Path(d) / "r.txt"
        req.write_text("torch>=3\n")
        results = run_check(sys.executable, proj, requirements=(req,))
    (r,) = by_cause(results, causes.DEPENDENCY_MISMATCH)
    assert r.summary.startswith("torch 2.") and "requires torch>=3" in r.summary


@pytest.mark.skipif(not Path(PY39).exists(), reason="needs a Python 3.9 interpreter")
def test_markers_are_evaluated_in_the_training_interpreter(tmp_path: Path) -> None:
    """dfdoctor runs on 3.11; a 3.9 training venv must see `python_version < "3.10"` requirements apply."""
    py, site = make_venv(tmp_path / "venv39", base=PY39)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "requirements.txt").write_text('backports-zoneinfo; python_version < "3.10"\n'
                                           'tomli>=2; python_version < "3.11"\n')
    install_dist(site, "tomli", "2.0.1")
    results = run_check(py, proj)
    (r,) = by_cause(results, causes.DEPENDENCY_MISSING)
    assert r.summary.startswith("backports-zoneinfo is not installed")
    assert results[0].data["python_version"].startswith("3.9")
    # the same file against dfdoctor's own 3.11: neither applies
    py311, _ = make_venv(tmp_path / "venv311")
    assert [x.status for x in run_check(py311, proj)] == [Status.OK]


def test_requirements_file_syntax(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("numpy>=1.26\n")
    (tmp_path / "r.txt").write_text(
        "-r base.txt\n"
        "--requirement=base.txt\n"  # included twice: read once
        "torch==2.13.0 --hash=sha256:aa --hash=sha256:bb\n"
        "accelerate>=0.30 \\\n  ; python_version >= '3.9'\n"
        "my-lib @ https://example.invalid/my_lib-1.0.tar.gz\n"
        "git+https://github.com/x/y.git\n"
        "./vendor/thing\n"
        "-e ../sibling\n"
        "pkg==${PKG_VERSION}\n"
        "-r missing.txt\n")
    reqs, skipped = read_requirements(tmp_path / "r.txt", tmp_path, {"PKG_VERSION": "1.2"})
    assert [(r.text, r.source) for r in reqs] == [
        ("numpy>=1.26", "base.txt:1"), ("torch==2.13.0", "r.txt:3"),
        ("accelerate>=0.30 ; python_version >= '3.9'", "r.txt:4"),
        ("my-lib @ https://example.invalid/my_lib-1.0.tar.gz", "r.txt:6"), ("pkg==1.2", "r.txt:10")]
    assert [s.why for s in skipped] == ["a local path or URL without a name", "a local path or URL without a name",
                                        "editable install", f"included file {tmp_path / 'missing.txt'} not found"]


def test_missing_explicit_file_and_broken_pyproject(venv, tmp_path: Path) -> None:
    py, site, proj = venv
    (proj / "pyproject.toml").write_text("[project\n")
    results = run_check(py, proj, requirements=(tmp_path / "nope.txt",))
    assert any(r.status is Status.ERROR and "nope.txt" in r.summary for r in results)
    assert any(r.status is Status.WARN and "pyproject.toml" in r.summary for r in results)


def test_cli_end_to_end(dfdoctor, venv, tmp_path: Path) -> None:
    py, site, proj = venv
    (proj / "requirements.txt").write_text("einops>=0.7\n")
    out = tmp_path / "o.json"
    res = dfdoctor("check", "--only", "deps.requirements", "--cwd", str(proj), "--format", "json",
                   "--output", str(out), "--", py, "train.py")
    assert res.returncode == 1, res.stderr
    chk = json.loads(out.read_text())["checks"][0]
    assert chk["cause"] == "dependency-missing" and "einops" in chk["summary"]


def test_command_with_a_missing_interpreter_is_not_checked_against_another(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("einops\n")
    ctx = Context(command=["python3.99", "train.py"], cwd=tmp_path, python=sys.executable, timeout=30)
    (r,) = deps_requirements.run(ctx)
    assert r.status is Status.SKIP and "python3.99" in r.summary


def test_conflict_in_what_the_script_imports_warns_without_requirements(venv) -> None:
    py, site, proj = venv
    install_dist(site, "transformers", "4.40.0", ("tokenizers<0.20,>=0.19",), top_level=("transformers",))
    install_dist(site, "tokenizers", "0.21.0", top_level=("tokenizers",))
    (proj / "train.py").write_text("import os\nfrom transformers import AutoModel\n")
    ctx = Context(command=[py, "train.py"], cwd=proj, python=py, timeout=30,
                  env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    (r,) = by_cause(deps_requirements.run(ctx), causes.DEPENDENCY_MISMATCH)
    # the conflict is observed; that the job uses transformers is read from its imports: a warning
    assert r.status is Status.WARN and r.basis == "static" and "transformers 4.40.0 requires tokenizers" in r.summary
    (proj / "requirements.txt").write_text("transformers\n")  # named by the project: the conflict is the job's
    (r,) = by_cause(deps_requirements.run(ctx), causes.DEPENDENCY_MISMATCH)
    assert r.status is Status.FAIL and r.basis == "observed"
    (proj / "requirements.txt").unlink()
    # the same environment, a script that does not import transformers: not the job's, a note of the ok line
    (proj / "train.py").write_text("import os\n")
    (r,) = deps_requirements.run(ctx)
    assert r.status is Status.OK and "1 conflict(s) among distributions the job does not use" in r.summary


def test_conflicts_match_pip_check(venv) -> None:
    """The offline scan finds what `pip check` finds (pre-releases, local versions, markers, extras)."""
    py, site, proj = venv
    install_dist(site, "transformers", "4.40.0", ("tokenizers<0.20,>=0.19", "huggingface-hub>=0.19",
                                                  'torch>=2; extra == "torch"'))
    install_dist(site, "tokenizers", "0.21.0")
    install_dist(site, "a-pkg", "1.0", ("b_pkg[x]>=2; python_version >= '3.8'", "c.pkg==1.*"))
    install_dist(site, "B-Pkg", "2.1rc1")
    install_dist(site, "c-pkg", "1.5+local")
    install_dist(site, "d", "1", ("e; sys_platform == 'win32'",))
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", py, "check"], capture_output=True, text=True,
                         timeout=120)
    pip_dists = sorted(line.split()[0] for line in pip.stdout.splitlines() if line.strip())
    results = run_check(py, proj)
    (line,) = results  # not the job's: listed in the ok line's details
    ours = sorted(e.split()[3] for e in line.details.splitlines() if e.startswith("not the job's: "))
    assert ours == pip_dists == ["transformers", "transformers"]


def test_a_requirements_file_of_any_size_is_checked(venv):
    """2,500 pins once made the probe's request one argv word over the kernel's 128 KiB cap: the probe could not
    start, the check skipped and the gate said OK. The request now travels in a file."""
    py, site, proj = venv
    install_dist(site, "present-dist", "1.0")
    lines = [f"dist-number-{i:04d}-with-a-long-descriptive-name==1.{i}.0  # pinned by the platform team" for i in
             range(2500)]
    (proj / "requirements-big.txt").write_text("present-dist==1.0\n" + "\n".join(lines) + "\n")
    from conftest import run_dfdoctor
    res = run_dfdoctor("check", "--only", "deps.requirements", "--requirements", "requirements-big.txt",
                       "--format", "json", "--python", py, "--", py, "train.py", cwd=proj,
                       env={"PYTHONPATH": ""})
    assert res.returncode == 1, (res.stdout[-2000:], res.stderr[-2000:])
    rec = json.loads(res.stdout)["checks"][0]
    assert rec["status"] == "fail" and rec["cause"] == causes.DEPENDENCY_MISSING, rec["summary"]
    results = rec["data"]["requirements"]
    assert len(results) == 2501
    assert sum(1 for r in results if r.get("installed")) == 1


def test_a_probe_request_of_megabytes_reaches_the_probe(tmp_path):
    """run_probe's request= reaches the probe whole (a file, not an argv word)."""
    from dfdoctor.probe import run_probe
    probe = tmp_path / "size_probe.py"
    probe.write_text("import json, os, sys\nsys.path.insert(0, %r)\nfrom _probe_support import answer, request\n"
                     "r = request()\nanswer({'n': len(r['blob']), 'last': r['blob'][-1]})\n"
                     % str(Path(__import__("dfdoctor.checks.probes", fromlist=["x"]).__file__).parent))
    ctx = Context(command=[], cwd=tmp_path, python=sys.executable, env=dict(os.environ), timeout=30)
    out = run_probe(ctx, probe, request={"blob": ["x" * 100] * 20000 + ["end"]})
    assert out.payload == {"n": 20001, "last": "end"}, (out.stderr, out.spawn_error)


def test_a_missing_requirement_the_job_never_imports_warns_and_one_it_imports_fails(venv) -> None:
    """llm.c lists `datasets`, which only its data scripts import: that it is missing is observed, that the job
    needs it is only the file's say, and the job's imports (read with ast) say otherwise: a warning. A missing
    distribution whose name an import carries (`yaml` for PyYAML) stays a failure."""
    py, site, proj = venv
    install_dist(site, "numpy", "2.1.0", top_level=("numpy",))
    (site / "numpy").mkdir()  # importable in the venv's interpreter
    (site / "numpy" / "__init__.py").write_text("")
    (proj / "requirements.txt").write_text("numpy\ndatasets\nPyYAML\n")
    (proj / "train.py").write_text("import os\nimport numpy as np\n\ndef cfg():\n    import yaml\n")
    results = run_check(py, proj)
    status = {r.summary.split()[0]: r for r in results if r.cause == causes.DEPENDENCY_MISSING}
    assert status["datasets"].status is Status.WARN and status["datasets"].basis == "static", status["datasets"]
    assert "train.py never imports it" in status["datasets"].summary
    assert status["PyYAML"].status is Status.FAIL  # `import yaml` cannot be found and PyYAML provides it
    (proj / "train.py").write_text("import numpy\n")
    assert all(r.status in (Status.OK, Status.WARN) for r in run_check(py, proj))  # nothing blocks the launch


@pytest.mark.parametrize("files", [
    # an import nobody can find, and no missing requirement is named after it: any of them may provide it
    {"train.py": "import numpy\nimport fancy_loader\n"},
    # an import computed at run time: the reading is not complete
    {"train.py": "import importlib\nmod = importlib.import_module('data' + 'sets')\n"},
    # the project's own module imports it: the job's code is more than the script
    {"train.py": "import numpy\nfrom prep import load\n", "prep.py": "import datasets\n"},
    # a folder of the same name without Python files (a cache, wandb's runs) is not the project's module
    {"train.py": "import numpy\n\ndef load():\n    import datasets\n", "datasets/cache-0001.arrow": ""},
])
def test_a_missing_requirement_stays_a_failure_where_the_reading_cannot_rule_it_out(venv, files) -> None:
    py, site, proj = venv
    install_dist(site, "numpy", "2.1.0", top_level=("numpy",))
    (site / "numpy").mkdir()
    (site / "numpy" / "__init__.py").write_text("")
    (proj / "requirements.txt").write_text("numpy\ndatasets\n")
    for name, text in files.items():
        (proj / name).parent.mkdir(parents=True, exist_ok=True)
        (proj / name).write_text(text)
    (r,) = [r for r in run_check(py, proj) if r.cause == causes.DEPENDENCY_MISSING]
    assert r.status is Status.FAIL and r.summary.startswith("datasets is not installed"), r


def test_what_is_installed_is_reused_only_until_something_is_installed_or_removed(venv) -> None:
    """The probe's answer is kept (a tenth of `import torch` saved per check) and reused while no folder on the
    interpreter's import path changed: an install or an uninstall between two checks is observed, never guessed."""
    import shutil

    py, site, proj = venv
    install_dist(site, "safetensors", "0.4.5")
    (proj / "requirements.txt").write_text("numpy>=1.26\nsafetensors\n")

    def reading():
        results = run_check(py, proj)
        missing = sorted(r.summary.split()[0] for r in by_cause(results, causes.DEPENDENCY_MISSING))
        return missing, results[0].data["installed_read_at"], results

    assert reading()[:2] == (["numpy"], None)  # observed
    missing, read_at, results = reading()
    assert missing == ["numpy"] and read_at is not None  # reused: nothing was installed
    install_dist(site, "numpy", "2.1.0")
    missing, read_at, results = reading()
    assert missing == [] and read_at is None and [r.status for r in results] == [Status.OK], results
    missing, read_at, results = reading()
    assert read_at is not None and "nothing on its import path has changed since" in results[0].details
    shutil.rmtree(next(site.glob("safetensors-*.dist-info")))
    missing, read_at, _ = reading()
    assert missing == ["safetensors"] and read_at is None
