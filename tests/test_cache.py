"""dfdoctor's cache: round trip, age, corruption and an unwritable folder; compile.race's key and what it keeps."""

from __future__ import annotations

import json
import os
import sys
import time

from dfdoctor import cache
from dfdoctor.context import Context
from dfdoctor.probe import ProbeOutcome

from dfdoctor.checks import compile_race as cr


def test_round_trip_and_age(own_cache_dir):
    key = {"interpreter": "/usr/bin/python3", "argv": ["--threads", "4"]}
    assert cache.lookup("k", key, 3600) is None
    path = cache.store("k", key, {"answer": [1, 2]})
    assert path and path.parent == own_cache_dir / "k"
    value, stored = cache.lookup("k", key, 3600)
    assert value == {"answer": [1, 2]} and abs(stored - time.time()) < 5
    assert cache.lookup("k", dict(key, argv=["--threads", "2"]), 3600) is None, "another key is another entry"
    assert cache.lookup("k", key, 0) is None, "max age 0 never reuses"
    entry = json.loads(path.read_text())
    entry["stored_at"] -= 7200
    path.write_text(json.dumps(entry))
    assert cache.lookup("k", key, 3600) is None, "a stale entry is not reused"
    assert list(path.parent.iterdir()) == [path], "no temporary file left beside the entry"


def test_corrupt_entry_and_unwritable_cache_are_just_misses(own_cache_dir, monkeypatch, tmp_path):
    path = cache.store("k", "key", 1)
    path.write_text('{"key": "key", "stored_at": ')  # half a file, as a crash mid-write would leave without rename
    assert cache.lookup("k", "key", 3600) is None
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cache.store("k", "key", 1) is None and cache.lookup("k", "key", 3600) is None
    assert blocker.read_text() == "not a folder"


def test_race_key_follows_the_torch_that_would_be_imported(tmp_path):
    """The key names where `import torch` would load from and that file's mtime: another torch or a
    reinstall is another key, and the probe never imports torch to find out."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('the fingerprint must not import torch')\n")
    base = ["--backend", "race"]
    real = cr._cache_key(Context(python=sys.executable, cwd=tmp_path), base, 3)
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    ctx = Context(python=sys.executable, cwd=tmp_path, env=env)
    shadowed = cr._cache_key(ctx, base, 3)
    assert real and shadowed and real != shadowed
    assert shadowed["interpreter"]["torch_origin"] == str(fake / "__init__.py")
    os.utime(fake / "__init__.py", ns=(1, 1))
    assert cr._cache_key(ctx, base, 3) != shadowed, "a reinstalled torch (new mtime) is another key"
    assert cr._cache_key(ctx, base, 2) != cr._cache_key(ctx, base, 3), "other settings, another key"


def _outcome(payload, timed_out=False) -> ProbeOutcome:
    return ProbeOutcome(argv=[], returncode=0, stdout="", stderr="", duration_s=1.0, timed_out=timed_out,
                        payload=payload)


def test_only_a_conclusive_reproduction_is_kept():
    race, fine = _outcome({"outcome": "race"}), _outcome({"outcome": "ok"})
    still_compiling = _outcome({"outcome": "hang", "stacks": "Thread 1:\n  File \"x.py\", line 1 in f\n"})
    assert cr._conclusive([race, race], [fine, fine], 2)
    assert not cr._conclusive([race, race], [fine, still_compiling], 2), "a slow run says nothing lasting"
    assert not cr._conclusive([race], [fine], 2), "a guarded series cut short by the time budget is not kept"
    assert not cr._conclusive([fine], [fine, fine], 2), "nor an unguarded one cut short before any reproduction"
    assert cr._conclusive([race], [fine, fine], 2), "one that ended at its first reproduction is (round 18)"
    assert not cr._conclusive([race, _outcome(None)], [fine, fine], 2), "a broken run is not kept"
