"""A Slurm job's output file read as its pace (doctor/slurm/watch.py): only bytes added are growth. slurmstepd
makes the file a moment after the job is RUNNING (later on a loaded node): a file that only came into being is
no progress, and a quiet job whose file appeared during the watch was `running`, "its output file grew during the
watch" (full run f, round 20)."""

from __future__ import annotations

from pathlib import Path

from dfdoctor.slurm.watch import SlurmSource, _size


def _source() -> SlurmSource:
    return SlurmSource("1", {}, watch_s=30.0, on_event=lambda *a: None, sampler=None, settle_s=0.0)


def test_a_file_that_comes_into_being_empty_has_not_grown(tmp_path: Path):
    out = tmp_path / "o-1.log"
    src = _source()
    src.out = str(out)
    src._count_growth(1.0, _size(str(out)))  # RUNNING, its file not made yet
    out.touch()
    src._count_growth(2.0, _size(str(out)))  # made, empty
    src._count_growth(3.0, _size(str(out)))
    assert src.grown_at is None and not src.pace.get("progress_lines"), (src.grown_at, src.pace)


def test_bytes_added_are_growth_whenever_the_file_was_made(tmp_path: Path):
    out = tmp_path / "o-1.log"
    src = _source()
    src.out = str(out)
    src._count_growth(1.0, _size(str(out)))  # not made yet
    out.write_text("step 1\n")
    src._count_growth(2.0, _size(str(out)))  # made with a line in it: grown
    assert src.grown_at == 2.0 and src.pace["progress_lines"] == 1
    out.write_text("step 1\nstep 2\n")
    src._count_growth(3.0, _size(str(out)))
    assert src.grown_at == 3.0 and src.pace["progress_lines"] == 2
