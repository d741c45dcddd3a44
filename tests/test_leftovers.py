"""The cleanup a check's worker leaves for its parent (doctor/leftovers.py): run once when the worker is killed,
and never from a folder someone else could write (what is in it is run)."""

from __future__ import annotations

import json
import os
import tempfile

from dfdoctor import leftovers


def test_a_registered_cleanup_runs_once_for_its_pid(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    mark = tmp_path / "cleaned"
    leftovers.register("k", [["touch", str(mark)]])
    leftovers.clean(os.getpid() + 1)  # another process's: not run
    assert not mark.exists()
    leftovers.clean(os.getpid())
    assert mark.exists()
    mark.unlink()
    leftovers.clean(os.getpid())  # forgotten once run
    assert not mark.exists()


def test_a_folder_others_can_write_is_never_used(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    planted = tmp_path / f"dfdoctor-leftovers-{os.getuid()}"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    mark = tmp_path / "ran"
    (planted / f"{os.getpid()}-x.json").write_text(json.dumps({"argvs": [["touch", str(mark)]]}))
    assert leftovers.register("k", [["true"]]) is None
    leftovers.clean(os.getpid())
    assert not mark.exists()
