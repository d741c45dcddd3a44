"""The runner survives checks that hang, raise, segfault, flood and leave daemons, installed as a real plugin."""

from __future__ import annotations

import json
import re
import time

import psutil
import pytest

from conftest import REPO, broken_plugin_site, pip_install_to, run_dfdoctor


@pytest.fixture(scope="module")
def hostile_path(tmp_path_factory):
    target = tmp_path_factory.mktemp("hostile-site")
    pip_install_to(REPO / "tests" / "plugins" / "dfdoctor-hostile", target)
    return target


def test_hostile_checks_are_contained(hostile_path, tmp_path):
    pids = tmp_path / "pids"
    env = {"PYTHONPATH": str(hostile_path), "HOSTILE_PIDS": str(pids)}
    t0 = time.monotonic()
    res = run_dfdoctor("check", "--only", "hostile.*", "--format", "json", "--output", "r.json",
                       "--format", "junit", "--output", "r.xml", "--format", "text", cwd=tmp_path, env=env,
                       timeout=60)
    elapsed = time.monotonic() - t0
    assert res.returncode == 1, res.stderr
    # The slowest culprit has a 2 s timeout (+1.5 s wrap-up); the flood takes a few seconds to pump 50 MB.
    assert elapsed < 20, f"took {elapsed:.1f} s"
    doc = json.loads((tmp_path / "r.json").read_text())
    by_id = {c["id"]: c for c in doc["checks"]}
    assert by_id["hostile.hang"]["status"] == "timeout"
    assert "hostile.hang" in by_id["hostile.hang"]["summary"] and "2 s timeout" in by_id["hostile.hang"]["summary"]
    assert by_id["hostile.hang-child"]["status"] == "timeout"
    assert by_id["hostile.raise"]["status"] == "error"
    assert "ValueError: hostile check blew up on purpose" in by_id["hostile.raise"]["summary"]
    assert "Traceback" in by_id["hostile.raise"]["details"]
    assert by_id["hostile.segfault"]["status"] == "error"
    assert "CalledProcessError" in by_id["hostile.segfault"]["summary"]
    assert by_id["hostile.self-segv"]["status"] == "error"
    assert "SIGSEGV" in by_id["hostile.self-segv"]["summary"]
    flood = by_id["hostile.flood"]
    assert flood["status"] == "ok"
    assert len(flood["output"]) < 1.1 * 2**20 and "bytes omitted by dfdoctor" in flood["output"]
    assert by_id["hostile.daemon"]["status"] == "ok"
    for cid in by_id:
        assert by_id[cid]["duration_s"] >= 0
    xml = (tmp_path / "r.xml").read_text()
    assert 'name="hostile.hang"' in xml and "<error" in xml
    assert "hostile.hang" in res.stdout and "TIMEOUT" in res.stdout
    # Nothing the hostile checks started is still alive: the hung workers, their children, the daemon.
    time.sleep(0.3)
    alive = [int(p) for p in pids.read_text().split() if psutil.pid_exists(int(p))
             and psutil.Process(int(p)).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left behind: {alive}"


def test_broken_plugin_is_an_error_not_a_crash(tmp_path):
    site = broken_plugin_site(tmp_path / "site")
    res = run_dfdoctor("check", "--format", "json", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    doc = json.loads(res.stdout)
    broken = [c for c in doc["checks"] if c["id"] == "plugin.broken.import"]
    assert broken and broken[0]["status"] == "error"
    assert "dfdoctor-broken" in broken[0]["summary"] and "no_such_module_xyz" in broken[0]["summary"]
    assert res.returncode == 1
    listing = run_dfdoctor("list-checks", env={"PYTHONPATH": str(site)})
    assert listing.returncode == 0 and "BROKEN" in listing.stdout


def test_list_checks_keeps_its_columns_with_a_broken_plugin(tmp_path):
    """A BROKEN row, whose name is longer than any check's id, lines up with the rest: the title (or error)
    column starts at the same place on every row."""
    site = broken_plugin_site(tmp_path / "site")
    ep = site / "dfdoctor_broken-0.1.dist-info" / "entry_points.txt"
    ep.write_text("[dfdoctor.checks]\na.very.long.plugin.check.identifier = no_such_module_xyz:check\n")
    lines = run_dfdoctor("list-checks", env={"PYTHONPATH": str(site)}).stdout.splitlines()
    assert any("BROKEN" in line for line in lines) and len(lines) > 5
    # columns are separated by two or more spaces; the fourth (title or error) starts after the third gap
    starts = {[m.end() for m in re.finditer(r"\S {2,}(?=\S)", line)][2] for line in lines}
    assert len(starts) == 1, "\n".join(lines)


def test_an_entry_point_named_unlike_its_check_id_is_refused(tmp_path):
    """A check's id is declared once: an entry point whose name differs from the @check id is a BROKEN plugin
    that says which name to use, not a check running under two ids."""
    site = broken_plugin_site(tmp_path / "site")
    (site / "misnamed_check.py").write_text(
        "from dfdoctor import check, ok\n\n\n@check('misnamed.real', title='t')\ndef c(ctx):\n    yield ok('fine')\n")
    (site / "dfdoctor_broken-0.1.dist-info" / "entry_points.txt").write_text(
        "[dfdoctor.checks]\nmisnamed.other = misnamed_check:c\n")
    listing = run_dfdoctor("list-checks", env={"PYTHONPATH": str(site)})
    row = [ln for ln in listing.stdout.splitlines() if ln.startswith("misnamed.other")]
    assert row and "BROKEN" in row[0] and "name the entry point misnamed.real" in row[0], listing.stdout
    assert "misnamed.real" not in [ln.split()[0] for ln in listing.stdout.splitlines() if ln.strip()]
    res = run_dfdoctor("check", "--only", "log.writable", "--format", "json", "--", "true", cwd=tmp_path,
                       env={"PYTHONPATH": str(site)})
    by_id = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    assert by_id["plugin.misnamed.other"]["status"] == "error" and "misnamed.real" not in by_id
    assert res.returncode == 1
