"""Issue 45: `running` comes sooner after its evidence, and on the same evidence. The heartbeat carries new lines
within NEWS_S (test_recorder.py); the settle check answers on the observation that shows steady output; the
stack look before `running` takes its first round while the job is about to earn it, so that after ripeness only
its second round is left, one to two gaps after the first (never less than one), as before never more than one
look's worth of judging: a compile deadlock beside a printing thread is still never `running` (test_launch.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.diagnose import jobstacks, stacks
from dfdoctor.launch.lookahead import LookAhead
from dfdoctor.watch import settle
from jobs.harness import job, kill_runs, launch

needs_py_spy = pytest.mark.skipif(not stacks.py_spy(), reason="the look reads stacks with py-spy")


def _loop(count: int, every: float, t0: float = 1000.0) -> dict:
    last = t0 + (count - 1) * every
    return {"loop": {"count": count, "first_t": t0, "last_t": last, "shape": "step #"}, "last_output_t": last}


def test_ripe_within_projects_the_loop_at_its_pace_and_the_settle_time():
    # a line every 0.5 s: 5 lines span 2.0 s; two more (a gap of 1 s) make the 3.0 s the loop needs
    assert settle.in_its_loop(_loop(5, 0.5)) is None
    assert settle.ripe_within(_loop(5, 0.5), talking_s=2.0, within_s=1.0)
    assert not settle.ripe_within(_loop(4, 0.5), talking_s=1.5, within_s=1.0)
    assert not settle.ripe_within({}, talking_s=3.0, within_s=1.0)  # no loop: the settle time decides
    assert settle.ripe_within({}, talking_s=9.2, within_s=1.0)
    # a loop about to reach its total is a phase: it never ripens early, projected or not
    phase = _loop(6, 0.5)
    phase["loop"].update(done=6, of=8, first_done=1)
    assert not settle.ripe_within(phase, talking_s=2.5, within_s=1.0)


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time\nwhile True:\n    time.sleep(0.05)\n"])
    time.sleep(0.3)
    yield p
    p.kill()
    p.wait()


@needs_py_spy
def test_a_round_taken_ahead_is_the_first_of_the_look_and_the_gap_is_kept(sleeper):
    ahead = jobstacks.first_round(sleeper.pid)
    assert ahead is not None and len(ahead.samples[0].looks) == 1
    first = ahead.samples[0].looks[0]
    samples = jobstacks.sample_job(sleeper.pid, ahead=ahead)
    assert ahead.used and samples[0].looks[0] is first and len(samples[0].looks) == 2
    # the second round began a gap after the first round's reads ended at the soonest
    assert time.monotonic() - ahead.began >= jobstacks.GAP_S, time.monotonic() - ahead.began
    assert samples[0].looks[1].at - first.at >= jobstacks.GAP_S, samples[0].looks[1].at - first.at


@needs_py_spy
def test_a_stale_round_is_not_used(sleeper):
    ahead = jobstacks.first_round(sleeper.pid)
    ahead.began -= (jobstacks.AHEAD_GAPS + 1) * jobstacks.GAP_S  # too old: a look of its own
    ahead.ended -= (jobstacks.AHEAD_GAPS + 1) * jobstacks.GAP_S
    samples = jobstacks.sample_job(sleeper.pid, ahead=ahead)
    assert not ahead.used and len(samples[0].looks) == 2 and samples[0].looks[0] is not ahead.samples[0].looks[0]


@needs_py_spy
def test_the_look_takes_a_round_a_gap_old_from_a_watch_that_kept_them_fresh(sleeper):
    """The watch asks for fresh rounds on every observation (every 0.05 s) while the job ripens; at the ripening
    line, 2.5 s on, the look is handed a round that is a gap old already (it waits for none of the gap). Rounds
    renewed every gap handed it one 0.5 s old: the look waited out the other half (issue 45)."""
    ahead = LookAhead()
    began = time.monotonic()
    while time.monotonic() - began < 2.5:
        ahead.keep_fresh(sleeper.pid)
        time.sleep(0.05)
    taken = ahead.take()
    ahead.close()
    assert taken is not None and time.monotonic() - taken.ended >= jobstacks.GAP_S, \
        (taken and time.monotonic() - taken.ended)


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.slow
@needs_py_spy
def test_the_look_before_running_takes_only_its_second_round(work):
    """A job printing every 0.5 s: `running` in its loop, after a look whose first round was taken ahead."""
    proc, rep = launch(work, *job("prints_every.py", "0.5"), watch=30)
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "running", v
    notes = [json.loads(ln) for ln in (Path(rep["run"]["dir"]) / "launcher.jsonl").read_text().splitlines()]
    looks = [e for e in notes if e["event"] == "stacks-sampled"]
    assert looks and looks[-1].get("first_round_s_before") is not None, notes
    # its second round came a gap after the first at the soonest: the look took only the rest of the gap
    assert looks[-1]["first_round_s_before"] + looks[-1]["took_s"] >= jobstacks.GAP_S - 0.05, looks[-1]
