""".ci/venv_install.py, the Makefile's installer: uv installs from exactly the sources pip would use, read from pip's
own settings (uv reads none of them), and a pip setting uv is not told of leaves the install to pip.

pip's settings come from one config file of the test's (PIP_CONFIG_FILE) with no other PIP_* variable, and no user
or site config (HOME and XDG_CONFIG_DIRS point into tmp_path); the venv's real pip reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO

SCRIPT = REPO / ".ci" / "venv_install.py"
REQUIREMENTS = str(REPO / "requirements-run.txt")


def planned(tmp_path, config: str, **env: str) -> tuple[list[str], list[str]]:
    """The pip settings uv is not told of, and uv's command line, where pip is configured by `config` alone."""
    (tmp_path / "pip.conf").write_text(config)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    run_env.update(PIP_CONFIG_FILE=str(tmp_path / "pip.conf"), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path),
                   XDG_CONFIG_DIRS=str(tmp_path / "none"), **env)
    code = ("import json, runpy, sys; m = runpy.run_path(sys.argv[1]); options, untold = m['pip_settings'](sys.argv[2]);"
            " print(json.dumps([untold, m['uv_command']('uv', 'VENV', sys.argv[2], options)]))")
    out = subprocess.run([sys.executable, "-c", code, str(SCRIPT), REQUIREMENTS], env=run_env, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    untold, cmd = json.loads(out)
    return untold, cmd


def pairs(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, word in enumerate(cmd[:-1]) if word == flag]


def test_uv_gets_every_source_and_the_constraints_pip_is_set_up_with(tmp_path):
    untold, cmd = planned(tmp_path, "[global]\nindex-url = file:///srv/index/simple\n"
                                    "extra-index-url = file:///srv/a/simple file:///srv/b/simple\n"
                                    "find-links = /srv/wheels\nconstraint = /srv/caps.txt\n",
                          PIP_FIND_LINKS="/srv/more-wheels")
    assert untold == []
    assert pairs(cmd, "--index-url") == ["file:///srv/index/simple"]
    assert pairs(cmd, "--extra-index-url") == ["file:///srv/a/simple", "file:///srv/b/simple"]
    # a PIP_* variable wins over the config file, in uv's command as in pip
    assert pairs(cmd, "--find-links") == ["/srv/more-wheels"]
    assert pairs(cmd, "--constraint") == ["/srv/caps.txt"]
    # pip takes the best version over all its sources, and compiles what it installs
    assert pairs(cmd, "--index-strategy") == ["unsafe-best-match"]
    assert "--compile-bytecode" in cmd and "--no-config" in cmd
    assert cmd[-2:] == ["-r", REQUIREMENTS]


def test_no_index_and_no_compile_are_given_as_pip_has_them(tmp_path):
    # (PIP_COMPILE=0: pip reads PIP_NO_COMPILE=1 as compile=1)
    untold, cmd = planned(tmp_path, "[global]\nno-index = true\nfind-links = /srv/wheels\n", PIP_COMPILE="0")
    assert untold == []
    assert "--no-index" in cmd and pairs(cmd, "--index-url") == [] and pairs(cmd, "--find-links") == ["/srv/wheels"]
    assert "--compile-bytecode" not in cmd


def test_a_pip_setting_uv_is_not_told_of_leaves_the_install_to_pip(tmp_path):
    untold, _ = planned(tmp_path, "[install]\npre = true\n", PIP_ONLY_BINARY=":all:")
    assert untold == ["format_control", "pre"]
