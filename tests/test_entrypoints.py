"""dfdoctor's reader of entry points (entrypoints.py) against importlib.metadata, which it stands in for: the same
entry points in the same order with the same distribution names, on this venv and on a sys.path of hand-made
distributions; where it cannot be sure (a zip on sys.path, a line it cannot parse) it says so (None) and the
registry asks importlib.metadata, which finds the same checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

# every group's entry points as each reader gives them, in a fresh interpreter (sys.path as PYTHONPATH makes it)
_BOTH = r"""
import json, sys
from importlib import metadata
from dfdoctor import entrypoints
out = {}
for group in sys.argv[1:]:
    ours = entrypoints.of_group(group)
    out[group] = {"ours": None if ours is None else [[e.name, e.value, e.group, e.dist.name] for e in ours],
                  "theirs": [[e.name, e.value, e.group, e.dist.name] for e in metadata.entry_points(group=group)]}
print(json.dumps(out))
"""


def _both(*groups: str, path: tuple[Path, ...] = ()) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, path), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", _BOTH, *groups], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _dist(site: Path, folder: str, metadata: str, entry_points: str | None) -> None:
    d = site / folder
    d.mkdir(parents=True)
    (d / "METADATA").write_text(metadata)
    if entry_points is not None:
        (d / "entry_points.txt").write_text(entry_points)


def test_this_venvs_entry_points_read_as_importlib_metadata_reads_them():
    got = _both("dfdoctor.checks", "console_scripts", "pytest11")
    for group, both in got.items():
        assert both["ours"] == both["theirs"], group
    assert len(got["dfdoctor.checks"]["ours"]) >= 20
    assert {d for *_, d in got["dfdoctor.checks"]["ours"]} == {"dfdoctor-launch"}


def test_hand_made_distributions_read_as_importlib_metadata_reads_them(tmp_path: Path):
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Dfd.Plugin_A-1.0.dist-info", "Metadata-Version: 2.1\nName: dfd.plugin_a \nVersion: 1.0\n\nName: no\n",
          "# a comment\n[console_scripts]\nx = a:x\n\n[dfdoctor.checks]\n  a.one = plugin_a : one  \n"
          "a.two=plugin_a:checks.two [extra]\n# a.three = no:no\n")
    _dist(first, "zzz-2.0.dist-info", "Metadata-Version: 2.1\nSummary: a folded\n  summary\nName: ZZZ\n",
          "[dfdoctor.checks]\nz.one = zzz:one\n")
    _dist(first, "empty-1.0.dist-info", "Metadata-Version: 2.1\nName: empty\n", None)
    (first / "old-1.0.egg-info").write_text("Metadata-Version: 1.0\nName: old\n")
    # the same name later on sys.path: the first one wins
    _dist(second, "dfd_plugin_a-0.9.dist-info", "Metadata-Version: 2.1\nName: dfd-plugin-a\n",
          "[dfdoctor.checks]\na.old = old:old\n")
    _dist(second, "b-1.0.egg-info", "Metadata-Version: 2.1\nName: b\n", "[dfdoctor.checks]\nb.one = b:one\n")
    got = _both("dfdoctor.checks", "console_scripts", path=(first, second))
    for group, both in got.items():
        assert both["ours"] == both["theirs"], group
    ours = {name: dist for name, _, _, dist in got["dfdoctor.checks"]["ours"]}
    assert ours["a.one"] == "dfd.plugin_a " and ours["z.one"] == "ZZZ" and ours["b.one"] == "b"
    assert "a.old" not in ours and "a.three" not in ours


def test_where_it_is_unsure_it_says_so_and_discover_finds_the_checks_through_importlib_metadata(tmp_path: Path):
    site = tmp_path / "site"
    _dist(site, "thief-0.1.dist-info", "Metadata-Version: 2.1\nName: dfdoctor-thief\n",
          "[dfdoctor.checks]\nthief.one = thief:one\n")
    (site / "thief.py").write_text("from dfdoctor import check\n\n"
                                   "@check('thief.one', title='a check of its own')\n"
                                   "def one(ctx):\n    return None\n")
    eggs = tmp_path / "eggs.zip"
    with zipfile.ZipFile(eggs, "w") as z:
        z.writestr("nothing.py", "")
    assert _both("dfdoctor.checks", path=(site,))["dfdoctor.checks"]["ours"] is not None
    got = _both("dfdoctor.checks", path=(site, eggs))["dfdoctor.checks"]
    assert got["ours"] is None and ["thief.one", "thief:one", "dfdoctor.checks", "dfdoctor-thief"] in got["theirs"]
    # a line importlib.metadata cannot parse either (it raises): not guessed at
    (site / "thief-0.1.dist-info" / "entry_points.txt").write_text("[dfdoctor.checks]\nthief.one\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", "from dfdoctor import entrypoints\n"
                        "print(entrypoints.of_group('dfdoctor.checks'))"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.stdout.strip() == "None", p.stdout + p.stderr
    # the registry, unsure on a zip, still names the plugin's check as importlib.metadata finds it
    (site / "thief-0.1.dist-info" / "entry_points.txt").write_text("[dfdoctor.checks]\nthief.one = thief:one\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(eggs), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", "from dfdoctor.registry import discover\n"
                        "print(sorted((c.id, c.source) for c in discover()[0] if c.source != 'built-in'))"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.stdout.strip() == "[('thief.one', 'dfdoctor-thief')]", p.stdout + p.stderr
