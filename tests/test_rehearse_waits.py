"""The rehearsal's look waits for events, not for time: the terminal hangs up as soon as the sentinel has started
(not a fixed pause after the line returned), and a job is known alive at its first heartbeat after the margin of
the hang-up race, dead as soon as it is gone (bench/hangup_margin.py measures that margin)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from dfdoctor.rehearse.runner import DRAIN_S, SETTLE_S, rehearse


def test_the_terminal_hangs_up_once_the_sentinel_has_started(tmp_path: Path):
    (tmp_path / "train.py").write_text("print('never run: the sentinel stands in for it')\n")
    line = (f"cd {tmp_path} && nohup setsid -f python3 -u {tmp_path}/train.py </dev/null >>{tmp_path}/train.log "
            "2>&1; sleep 1")
    r = rehearse(line)
    assert r.started and r.alive, (r.places, r.output)
    # the sentinel started during the line's own `sleep 1`: no pause after the return (it was DRAIN_S, 0.8 s)
    assert r.ended_at - r.returned_at < DRAIN_S / 2, r.ended_at - r.returned_at
    assert not list(tmp_path.glob("*dfdoctor-rh-*")) and not (tmp_path / "train.log").exists()


def test_a_job_the_hangup_kills_is_seen_dead_without_waiting_for_heartbeats(tmp_path: Path):
    """A plain `&` in a terminal dies of SIGHUP as the terminal hangs up: its own word (end.json) ends the
    look's wait at once, well before the margin and a second without heartbeats would have."""
    (tmp_path / "train.py").write_text("print('never run')\n")
    r = rehearse(f"python3 -u {tmp_path}/train.py & sleep 0.5")
    looked = time.monotonic() - r.ended_at
    p = r.job_place
    assert r.started and not r.alive and p.end and p.end.get("how") == "signal", (p, r.output)
    # before: 1 s for the job to outlive its session, heartbeats 0.6 s apart and 0.3 s to stop, after the hang-up;
    # any way out of the look's wait but the job's own word takes the margin and a second without heartbeats
    # (1.5 s): below that, on a loaded machine too, the look's own forks after its wait take the rest
    assert looked < SETTLE_S + 1.0, looked


def test_a_job_that_starts_late_is_seen_killed_by_the_hangup_not_as_never_started(tmp_path: Path, monkeypatch):
    """The terminal stays open while the job is on its way (a process of the line still runs) and hangs up once it
    started: a python that took longer than DRAIN_S to start (a loaded machine; here a wrapper that sleeps first)
    is seen killed by SIGHUP, not said never to have run."""
    (tmp_path / "train.py").write_text("print('never run')\n")
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "python3").write_text(f"#!/bin/sh\nsleep {2 * DRAIN_S}\nexec {shutil.which('python3')} \"$@\"\n")
    (slow / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:{os.environ['PATH']}")
    r = rehearse(f"python3 -u {tmp_path}/train.py & sleep 0.5")
    p = r.job_place
    assert r.started and not r.alive and p.end and p.end.get("how") == "signal", (p, r.output)
    # the terminal stayed open while the job was on its way: it hung up no sooner than the wrapper let python start
    # (2 * DRAIN_S after the line began), where hanging up DRAIN_S after the line's return would be 0.5 + DRAIN_S.
    # Counted from the line's start, not its return: under load `sleep 0.5` itself returns late (CI, round 20)
    began = r.returned_at - r.returned_s
    assert r.ended_at - began >= 2 * DRAIN_S, (r.ended_at - began, r.returned_s)


def test_a_surviving_job_is_judged_only_after_the_margin_and_a_heartbeat_after_it(tmp_path: Path):
    """The margin of the hang-up race is kept in real time (look.sh reads /proc/uptime): the look does not call the
    job alive before SETTLE_S after the hang-up, and it saw a heartbeat written after that; nor does it stretch
    the margin by counting its own turns (a turn forks several processes: under load 0.5 s took a second)."""
    (tmp_path / "train.py").write_text("print('never run')\n")
    r = rehearse(f"cd {tmp_path} && nohup setsid -f python3 -u {tmp_path}/train.py </dev/null "
                 f">>{tmp_path}/train.log 2>&1; sleep 1")
    looked = time.monotonic() - r.ended_at
    p = r.job_place
    assert r.alive and p.running and not p.end, (p, r.output)
    assert "none" not in p.beats and p.beats[0] != p.beats[1], p.beats  # a beat after the margin was seen
    assert SETTLE_S <= looked < SETTLE_S + 1.0, looked
