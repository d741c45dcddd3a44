"""What the sentinel tells the fix search of a script's place (issue 39, rehearse/venvs.py): the modules of its
top-level imports that the running interpreter cannot find, and the virtual environments beside it, each proved
by its pyvenv.cfg. Run as the rehearsal runs it: the sentinel's own file, by a real interpreter, in the script's
folder, on real folders (a real `python3 -m venv`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dfdoctor.rehearse import runner

PROBE = "import json, sys; sys.path.insert(0, sys.argv[1]); import sentinel; d = {}; " \
        "sentinel._project(sys.argv[2], d); print(json.dumps(d))"


def _seen(tmp_path: Path, script: Path, cwd: Path) -> dict:
    """The sentinel's word on `script`, run from `cwd` as the job would be."""
    home = tmp_path / "rh"
    home.mkdir(exist_ok=True)
    (home / "sentinel.py").write_text(runner.SENTINEL)
    p = subprocess.run([sys.executable, "-I", "-c", PROBE, str(home), str(script.relative_to(cwd))], cwd=cwd,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_sentinel_names_the_missing_modules_and_the_venv_beside_the_script(tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True, timeout=60)
    (project / "src" / "helper_mod.py").write_text("X = 1\n")  # the script's own folder comes first, as it runs
    script = project / "src" / "train.py"
    script.write_text("import os, dfd_absent_mod.sub\nfrom json import dumps\nimport helper_mod\n"
                      "try:\n    import dfd_optional\nexcept ImportError:\n    pass\n"
                      "def f():\n    import dfd_lazy\n")
    seen = _seen(tmp_path, script, project / "src")
    assert seen["modules_missing"] == ["dfd_absent_mod"], seen  # module level only: not the guarded, not the lazy
    assert seen["venvs"] == [str(project / ".venv" / "bin" / "python")], seen  # one folder up: the project's root


def test_a_folder_named_like_a_venv_is_none_without_its_pyvenv_cfg_and_a_readme_names_another(tmp_path):
    project = tmp_path / "p"
    fake = project / "env" / "bin"
    fake.mkdir(parents=True)
    (fake / "python").symlink_to(sys.executable)  # a bin/python, but no pyvenv.cfg: no venv
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / "envs" / "main")], check=True,
                   timeout=60)
    (project / "README.md").write_text("Set up:\n\n    source envs/main/bin/activate && pip install -e .\n")
    script = project / "train.py"
    script.write_text("import json\n")
    seen = _seen(tmp_path, script, project)
    assert seen["modules_missing"] == [], seen
    assert seen["venvs"] == [str(project / "envs" / "main" / "bin" / "python")], seen
