"""The example plugin installs with pip and its check is found, listed and run like a built-in."""

import json
import os
import subprocess

from conftest import DFDOCTOR, REPO, pip_install_to, run_dfdoctor


def test_example_plugin_installs_and_runs(tmp_path):
    site = tmp_path / "site"
    pip_install_to(REPO / "examples" / "dfdoctor-plugin-example", site)
    env = {"PYTHONPATH": str(site)}
    listing = run_dfdoctor("list-checks", "--format", "json", env=env)
    rows = {r["id"]: r for r in json.loads(listing.stdout)["checks"]}
    assert rows["limits.open-files"]["source"] == "dfdoctor-plugin-example"
    assert rows["log.writable"]["source"] == "built-in"
    # The check reads the limit the job inherits: a low one is a warning, which --fail-on warn gates on.
    res = subprocess.run(["bash", "-c", f"ulimit -n 512 && {DFDOCTOR} check --only 'limits.*' --format json "
                          "--fail-on warn"], capture_output=True, text=True, env={**os.environ, **env},
                         cwd=tmp_path, timeout=60)
    doc = json.loads(res.stdout)
    assert [c["id"] for c in doc["checks"]] == ["limits.open-files"]
    assert doc["checks"][0]["status"] == "warn" and "512" in doc["checks"][0]["summary"]
    assert res.returncode == 1
    res = subprocess.run(["bash", "-c", f"ulimit -n $(ulimit -Hn) && {DFDOCTOR} check --only 'limits.*' --format json"],
                         capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=60)
    hard = int(subprocess.run(["bash", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout.strip()
               .replace("unlimited", str(1 << 30)))
    expected = ("ok", 0) if hard >= 65536 else ("warn", 0)
    assert (json.loads(res.stdout)["checks"][0]["status"], res.returncode) == expected
