"""A check that says from the context alone that it does not apply is skipped without a worker process (most of a
local `check`'s checks: no --log, no --target); one whose `not_applicable` raises still becomes its `error`."""

from __future__ import annotations

import os
from pathlib import Path

from dfdoctor import runner
from dfdoctor.context import Context
from dfdoctor.model import Status
from dfdoctor.registry import Check, check, discover


def _ran_in(marker: Path):
    def func(ctx):
        marker.write_text(str(os.getpid()))
        return []
    return func


def test_a_check_that_does_not_apply_is_skipped_in_this_process_with_its_reason(tmp_path):
    marker = tmp_path / "ran"
    chk = check("demo.here", title="demo", not_applicable=lambda ctx: "no --log given")(_ran_in(marker))
    (rec,) = runner.run_checks([chk], Context(cwd=tmp_path), "pre")
    assert rec.status is Status.SKIP and rec.summary == "no --log given"
    assert not marker.exists()  # the check's own code never ran
    assert chk.run(Context(cwd=tmp_path))[0].summary == "no --log given"  # the same answer, called directly


def test_a_check_that_applies_runs_in_a_worker(tmp_path):
    marker = tmp_path / "ran"
    chk = check("demo.there", title="demo", not_applicable=lambda ctx: None)(_ran_in(marker))
    (rec,) = runner.run_checks([chk], Context(cwd=tmp_path), "pre")
    assert rec.status is Status.OK and int(marker.read_text()) != os.getpid()


def test_a_not_applicable_that_raises_is_the_checks_error_not_dfdoctors_crash(tmp_path):
    marker = tmp_path / "ran"

    def broken(ctx):
        raise KeyError("log")

    chk = Check("demo.broken", "demo", ("pre",), 10.0, _ran_in(marker), not_applicable=broken)
    (rec,) = runner.run_checks([chk], Context(cwd=tmp_path), "pre")
    assert rec.status is Status.ERROR and "KeyError" in rec.summary, rec
    assert not marker.exists()


def test_built_in_checks_that_cannot_apply_here_start_no_worker(tmp_path, monkeypatch):
    """No --log, no --target: log.writable, target.reachable and persistence.session are answered here."""
    started = []
    real = runner._start
    monkeypatch.setattr(runner, "_start", lambda chk, *a: started.append(chk.id) or real(chk, *a))
    ids = ("log.writable", "target.reachable", "persistence.session")
    checks = [c for c in discover()[0] if c.id in ids]
    recs = runner.run_checks(checks, Context(cwd=tmp_path), "pre")
    assert sorted(r.id for r in recs) == sorted(ids) and all(r.status is Status.SKIP for r in recs)
    assert started == []
