"""The one watch loop (dfdoctor.watch.loop), driven by a source that hands it observations: no job, no sleep, no
load. Each test is what the loop must do with what a source says; the sources of a run folder (here or on a
target) and of Slurm are tested with real jobs in test_launch*, test_remote_launch*, test_stuck, test_slurm*."""

from __future__ import annotations

import io
from typing import Any, Optional, Union

from dfdoctor.progress import WatchLine
from dfdoctor.watch.loop import Ended, drive
from dfdoctor.watch.policy import SAMPLE_S, Observation, Policy

T0 = 1_000_000.0


class Clock:
    """The watch's clock: it moves only when the loop sleeps (or a look takes time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


class FakeSource:
    """A source that hands the loop a story: `story(t)` gives what it sees at t (an Observation, an Ended, or
    words); each call the loop makes is noted."""

    stacks_where = " on node9"

    def __init__(self, story, clock: Clock, finding_at: Optional[float] = None, look_takes: float = 1.5,
                 unsettled: Optional[str] = None) -> None:
        self.story, self.clock, self.finding_at, self.look_takes = story, clock, finding_at, look_takes
        self.unsettled = unsettled
        self.calls: list[tuple[str, float]] = []

    def observe(self, t: float) -> Union[Observation, Ended, str]:
        self.calls.append(("observe", t))
        return self.story(t)

    def settle(self, o: Observation, steady: bool) -> None:
        o.unsettled = self.unsettled

    def waiting_for(self, o: Observation, steady: bool) -> str:
        return "steady" if steady else "not steady"

    def sample(self, o: Observation) -> Optional[Any]:
        self.calls.append(("sample", o.t))
        self.clock.now += self.look_takes
        return ("stuck", o.t) if self.finding_at is not None and o.t >= self.finding_at else None

    def running(self, o: Observation, looping: Optional[str]) -> Any:
        self.calls.append(("running", o.t))
        return ("running", o.t, looping)

    def out_of_time(self, o: Observation) -> Optional[Any]:
        self.calls.append(("out_of_time", o.t))
        return ("out of time", o.t)

    def did(self, what: str) -> list[float]:
        return [t for name, t in self.calls if name == what]


def steady_output(t: float) -> Observation:
    """A job that prints four lines a second from the start."""
    lines = int(t * 4) + 1
    beat = {"progress_lines": lines, "first_output_t": T0, "last_output_t": T0 + t}
    return Observation(t=t, alive=True, progress=lines, silent_s=0.1, talking_s=t, heartbeat=beat, fresh=True,
                       wrote=True)


def one_line_then_silence(t: float) -> Observation:
    """A banner at 0 s, then nothing."""
    beat = {"progress_lines": 1, "first_output_t": T0, "last_output_t": T0}
    return Observation(t=t, alive=True, progress=1, silent_s=t, talking_s=t, heartbeat=beat, wrote=True)


def run(source: FakeSource, clock: Clock, watch_s: float = 60, settle_s: float = 3, poll_s: float = 0.5,
        line: Optional[WatchLine] = None) -> Any:
    return drive(source, Policy(watch_s, settle_s), line or WatchLine(enabled=False), poll_s, clock=clock,
                 sleep=clock.sleep)


def test_steady_output_past_the_settle_time_is_the_sources_running_result():
    clock = Clock()
    src = FakeSource(steady_output, clock)
    result = run(src, clock)
    assert result[0] == "running" and 3.0 <= result[1] <= 3.5, result
    assert not src.did("sample") and not src.did("out_of_time")
    assert set(clock.slept) == {0.5}, "the loop waits the poll interval between observations"


def test_the_sources_own_end_ends_the_watch_at_once():
    clock = Clock()
    src = FakeSource(lambda t: Ended("it died") if t >= 2 else steady_output(t), clock)
    assert run(src, clock) == "it died"
    assert src.did("observe")[-1] == 2.0 and not src.did("running")


def test_words_before_a_job_exists_are_shown_and_nothing_is_judged():
    """A job in Slurm's queue (or a recorder starting) is no observation: the loop shows what it waits for and
    does not end the watch on its own, whatever the clock says; the source decides."""
    clock, buf = Clock(), io.StringIO()
    src = FakeSource(lambda t: "in Slurm's queue (Resources)" if t < 100 else Ended("pending"), clock)
    assert run(src, clock, watch_s=5, line=WatchLine(buf, enabled=True)) == "pending"
    assert "in Slurm's queue (Resources)" in buf.getvalue()
    assert not src.did("out_of_time") and not src.did("sample")


def test_a_silent_job_is_sampled_and_a_proven_wait_ends_the_watch():
    clock = Clock()
    src = FakeSource(one_line_then_silence, clock, finding_at=0.0)
    assert run(src, clock) == ("stuck", 5.0)  # sampled once silent for 5 s (no rhythm yet)


def test_a_look_that_proves_nothing_is_taken_again_only_after_sample_s():
    clock, buf = Clock(), io.StringIO()
    src = FakeSource(one_line_then_silence, clock, finding_at=12.0, look_takes=1.5)
    result = run(src, clock, line=WatchLine(buf, enabled=True))
    looks = src.did("sample")
    assert looks[0] == 5.0 and all(b - a >= SAMPLE_S for a, b in zip(looks, looks[1:])), looks
    assert result == ("stuck", looks[-1]) and looks[-1] >= 12.0
    assert "looking at the stacks of its processes on node9" in buf.getvalue()


def test_the_end_of_the_watch_asks_the_source_and_observes_again_when_it_is_not_certain():
    clock = Clock()
    answers = [None, None, ("out of time", "certain")]

    class NotSureYet(FakeSource):
        def out_of_time(self, o: Observation) -> Optional[Any]:
            super().out_of_time(o)
            return answers.pop(0)

    src = NotSureYet(one_line_then_silence, clock, look_takes=0.0)
    src.stacks_where = ""
    assert run(src, clock, watch_s=8) == ("out of time", "certain")
    assert src.did("out_of_time") == [8.0, 8.5, 9.0]


def test_a_job_not_settled_is_not_called_running_until_the_watch_ends_then_it_is_out_of_time():
    """A rank missing (the source's settle check says so): steady output is not `running`."""
    clock = Clock()
    src = FakeSource(steady_output, clock, unsettled="1 of 2 ranks are alive")
    assert run(src, clock, watch_s=10) == ("out of time", 10.0)
    assert not src.did("running")


def test_the_line_says_the_age_of_the_last_output_only_of_a_job_that_wrote():
    clock, buf = Clock(), io.StringIO()

    def story(t: float) -> Union[Observation, Ended]:
        if t >= 1.0:
            return Ended("done")
        return Observation(t=t, alive=True, progress=0, silent_s=t, talking_s=t, heartbeat={}, wrote=False)

    assert run(FakeSource(story, clock), clock, line=WatchLine(buf, enabled=True)) == "done"
    assert "not steady" in buf.getvalue() and "last line" not in buf.getvalue()
    buf2 = io.StringIO()
    clock2 = Clock()
    run(FakeSource(lambda t: Ended("done") if t >= 1.0 else one_line_then_silence(t), clock2), clock2,
        line=WatchLine(buf2, enabled=True))
    assert "last line 0 s ago" in buf2.getvalue()


def test_an_end_at_the_first_observation_still_says_what_the_watch_waited_for():
    """A job Slurm will never start ends the watch at once: the line still says it was in the queue (a person
    saw the verdict come from somewhere), and is erased by the caller before the verdict."""
    clock, buf = Clock(), io.StringIO()
    src = FakeSource(lambda t: Ended("never-starts", "in Slurm's queue (PartitionConfig)"), clock)
    assert run(src, clock, line=WatchLine(buf, enabled=True)) == "never-starts"
    assert "watching the job for 0 s: in Slurm's queue (PartitionConfig)" in buf.getvalue()


def test_a_targets_source_says_where_it_looks_at_the_stacks(tmp_path):
    """The progress line said "looking at the stacks of its processes" for a job on a container as for one here."""
    from dfdoctor.launch.remote import RemoteRun
    from dfdoctor.targets import parse_target
    src = RemoteRun(parse_target("pct://root@box/200"), "/root/.dfdoctor/runs/x").source(tmp_path, 10.0)
    assert src.stacks_where == " on pct://root@box/200"
