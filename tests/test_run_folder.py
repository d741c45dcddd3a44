"""dfdoctor.run: a run folder written through one RunFolder, and the processes its record names checked here."""

from __future__ import annotations

import json
from pathlib import Path

from dfdoctor.agent.procfs import proc_start_time
from dfdoctor.run.folder import RunFolder, append_event, new_run
from dfdoctor.agent.names import LAUNCHER, MASKS
from dfdoctor.run.record import load, still_runs
from support.processes import live_and_zombie

SECRET = "s3cr3t-" + "q" * 20


def _notes(run_dir: Path) -> str:
    return (run_dir / LAUNCHER).read_text()


def test_notes_are_masked_by_the_launch_fingerprints_read_once(tmp_path):
    """The launch's secret is not in this shell's environment: only masks.json knows it. Every note masks it,
    and masks.json is read once: a note written after the file is gone is masked all the same."""
    _, run_dir = new_run(tmp_path)
    folder = RunFolder.at(run_dir)
    folder.keep_prints({"TRAINER_SECRET": SECRET}, ["python", "train.py"])
    append_event(run_dir, "first", detail=f"the job printed {SECRET}")
    (run_dir / MASKS).unlink()  # not read again
    append_event(run_dir, "second", detail=f"and again {SECRET}")
    text = _notes(run_dir)
    assert SECRET not in text and text.count("***") == 2, text
    assert [e["event"] for e in load(run_dir).launcher] == ["first", "second"]
    assert RunFolder.at(run_dir) is folder


def test_new_fingerprints_are_used_from_the_next_note(tmp_path):
    """keep_prints through the RunFolder: the notes after it mask what it keeps (the old prints are not stale)."""
    _, run_dir = new_run(tmp_path)
    folder = RunFolder.at(run_dir)
    folder.append_event("before", detail="nothing kept yet")
    folder.keep_prints({"TRAINER_SECRET": SECRET}, [])
    folder.append_event("after", detail=SECRET)
    assert SECRET not in _notes(run_dir)


def test_a_secret_in_a_note_argv_is_masked(tmp_path):
    """A note's own argv teaches the masker its secrets (`--api-key VALUE`), as each note did before."""
    _, run_dir = new_run(tmp_path)
    append_event(run_dir, "launched", argv=["python", "train.py", "--api-key", SECRET], said=f"key {SECRET}")
    text = _notes(run_dir)
    assert SECRET not in text and json.loads(text)["argv"][:2] == ["python", "train.py"]


def test_still_runs_is_the_same_live_process_and_not_a_zombie():
    """A pid counts as the process the record names only with the same start time; a zombie holds nothing."""
    with live_and_zombie() as (live, zombie):
        start = proc_start_time(live.pid)
        assert still_runs(live.pid, start) and still_runs(live.pid, None)
        assert not still_runs(live.pid, start + 1), "same pid, another start time: another process"
        assert not still_runs(zombie.pid, proc_start_time(zombie.pid))
    assert not still_runs(live.pid, start)


def test_a_hand_off_is_open_from_the_exit_event_that_names_its_holders(tmp_path):
    """The recorder writes the exit event (naming who still holds the pipes) a moment before the "handoff" event:
    a look between the two must not call the job finished (CI once saw "ran to completion" while its daemon ran)."""
    from dfdoctor.run.record import RunRecord

    holder = {"pid": 4242, "cmdline": "python3 daemon.py"}
    exit_event = {"event": "exit", "exit_code": 0, "handed_off": [holder]}
    between = RunRecord(tmp_path, events=[{"event": "spawned", "pid": 4241}, exit_event])
    assert between.handoff_open and not between.finished
    after = RunRecord(tmp_path, events=[*between.events, {"event": "handoff", "holders": [holder]}])
    assert after.handoff_open and not after.finished
    done = RunRecord(tmp_path, events=[*after.events, {"event": "handoff-ended", "ended": []}])
    assert not done.handoff_open and done.finished
    # a plain exit, or a failure with stragglers on the pipes, is finished at once
    assert RunRecord(tmp_path, events=[{"event": "exit", "exit_code": 0, "handed_off": []}]).finished
    assert RunRecord(tmp_path, events=[{"event": "exit", "exit_code": 1, "handed_off": [holder]}]).finished
