"""record.Rereader: a run folder read again and again by a watch (20 times a second) reads only the files that
changed since its last read, and sees every change the recorder makes (issue 45)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dfdoctor.agent.names import HEARTBEAT, LAUNCHER, RECORD, SPEC
from dfdoctor.run import record
from dfdoctor.safefile import write_atomically


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / SPEC).write_text(json.dumps({"run_id": "r1", "argv": ["python3", "train.py"]}))
    (d / RECORD).write_text(json.dumps({"event": "spawned", "pid": 4242, "t": 1.0}) + "\n")
    (d / LAUNCHER).write_text(json.dumps({"event": "launched", "t": 0.5}) + "\n")
    write_atomically(d / HEARTBEAT, json.dumps({"t": 2.0, "progress_lines": 1}))
    return d


def _same(a: record.RunRecord, b: record.RunRecord) -> None:
    assert (a.spec, a.events, a.launcher, a.heartbeat) == (b.spec, b.events, b.launcher, b.heartbeat)


def test_every_change_the_recorder_makes_is_read(tmp_path: Path):
    d = _folder(tmp_path)
    reader = record.Rereader()
    _same(reader.load(d), record.load(d))
    with open(d / RECORD, "a") as f:  # the recorder appends to its record
        f.write(json.dumps({"event": "exit", "exit_code": 0, "t": 3.0}) + "\n")
    # and replaces its heartbeat whole: same size, other content
    write_atomically(d / HEARTBEAT, json.dumps({"t": 2.5, "progress_lines": 2}))
    run = reader.load(d)
    _same(run, record.load(d))
    assert run.exit == {"event": "exit", "exit_code": 0, "t": 3.0} and run.heartbeat["progress_lines"] == 2
    (d / HEARTBEAT).unlink()
    assert reader.load(d).heartbeat is None


def test_a_record_is_its_own(tmp_path: Path):
    """What one record's reader changes in it is not in the next record (each gets its own lists and dicts)."""
    d = _folder(tmp_path)
    reader = record.Rereader()
    first = reader.load(d)
    first.events.append({"event": "exit"})
    first.events[0]["pid"] = 1
    first.heartbeat["progress_lines"] = 99
    first.spec["argv"] = []
    _same(reader.load(d), record.load(d))


# reads a folder twice with one Rereader and says which files the second read opened
_TWICE = """
import sys
from dfdoctor.run import record
reader = record.Rereader()
reader.load(sys.argv[1])
opened = []
sys.addaudithook(lambda event, args: opened.append(args[0]) if event == "open" else None)
reader.load(sys.argv[1])
print(len(opened), opened[:4])
"""


def test_an_unchanged_folder_is_not_read_again(tmp_path: Path):
    d = _folder(tmp_path)
    p = subprocess.run([sys.executable, "-c", _TWICE, str(d)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == "0", p.stdout
