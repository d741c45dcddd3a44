"""The watch's policy, handed observations: no job, no sleep, no load. Each test is one story a real watch saw."""

from __future__ import annotations

from typing import Optional

from dfdoctor.watch.policy import SAMPLE_S, Decision, Observation, Policy

T0 = 1_000_000.0  # the job's machine's wall clock at the watch's start


def hb(lines: int, first: Optional[float] = None, last: Optional[float] = None, loop: Optional[dict] = None,
       gap: Optional[float] = None) -> dict:
    """A recorder's heartbeat: `lines` progress lines between `first` and `last` (seconds into the watch), the last
    output `gap` seconds after the one before it."""
    out: dict = {"progress_lines": lines, "silence_before_last_s": gap}
    if first is not None:
        out.update(first_output_t=T0 + first, last_output_t=T0 + (last if last is not None else first))
    if loop:
        out["loop"] = loop
    return out


def obs(t: float, progress: int, silent: float, talking: float, beat: dict, **kw) -> Observation:
    return Observation(t=t, alive=True, progress=progress, silent_s=silent, talking_s=talking, heartbeat=beat, **kw)


def test_output_in_bursts_past_the_settle_time_is_running():
    p = Policy(watch_s=60, settle_s=3)
    seen = [p.decide(obs(t, int(t * 4), 0.1, t, hb(int(t * 4), 0.0, t))) for t in (0.5, 1.0, 1.5, 2.0, 2.5)]
    assert seen == [Decision.WAIT] * 5  # steady (3 bursts over 2 s) but printing for less than 3 s
    assert p.decide(obs(3.0, 12, 0.1, 3.0, hb(12, 0.0, 3.0))) is Decision.RUNNING


def test_a_banner_then_silence_is_looked_at_not_called_running():
    p = Policy(watch_s=60, settle_s=3)
    assert p.decide(obs(0.5, 1, 0.0, 0.0, hb(1, 0.5))) is Decision.WAIT
    for t in (2.0, 4.0, 5.0):
        assert p.decide(obs(t, 1, t - 0.5, t - 0.5, hb(1, 0.5))) is Decision.WAIT  # silent under 5 s
    assert p.decide(obs(5.6, 1, 5.1, 5.1, hb(1, 0.5))) is Decision.SAMPLE
    p.sampled(7.0)  # the look took 1.4 s and named no wait
    assert p.decide(obs(8.0, 1, 7.5, 7.5, hb(1, 0.5))) is Decision.WAIT  # not again before SAMPLE_S
    assert p.decide(obs(7.0 + SAMPLE_S, 1, 10.5, 10.5, hb(1, 0.5))) is Decision.SAMPLE
    p.sampled(12.0)
    assert p.decide(obs(60.0, 1, 59.5, 59.5, hb(1, 0.5), can_sample=False)) is Decision.OUT_OF_TIME


def test_a_job_in_its_loop_is_running_before_its_settle_time():
    loop = {"shape": "step # loss #", "count": 12, "first_t": T0 + 0.5, "last_t": T0 + 4.0}
    p = Policy(watch_s=60, settle_s=30)
    for t in (1.0, 2.0, 3.0):
        assert p.decide(obs(t, int(t * 3), 0.2, t, hb(int(t * 3), 0.5, t))) is Decision.WAIT
    assert p.decide(obs(4.0, 12, 0.2, 4.0, hb(12, 0.5, 4.0, loop))) is Decision.RUNNING
    assert p.looping and "in its loop" in p.looping


def test_a_loop_about_to_reach_its_total_is_a_phase_and_holds_running_back_to_the_end_of_the_watch():
    p = Policy(watch_s=8, settle_s=10)
    for t in range(1, 8):  # `warmup step N/50` at 5 a second: always within the settle time of its end
        loop = {"shape": "warmup step #/# loss #", "count": t * 5, "first_t": T0, "last_t": T0 + t,
                "done": t * 5, "of": 50, "first_done": 0}
        d = p.decide(obs(float(t), t * 5, 0.1, float(t), hb(t * 5, 0.0, float(t), loop)))
        assert d is Decision.WAIT, (t, d)
    # at the end of the watch a phase still going is as good as the watch can see: running (as before the policy)
    assert p.decide(obs(8.0, 40, 0.1, 8.0, hb(40, 0.0, 8.0, loop))) is Decision.RUNNING


def test_output_back_after_a_silence_must_show_its_pace_again():
    p = Policy(watch_s=60, settle_s=0)
    p.decide(obs(0.5, 1, 0.0, 0.0, hb(1, 0.5), can_sample=False))
    # 12 s of silence, then one line: not steady again (it died 3 s later in the job this was seen in)
    assert p.decide(obs(12.5, 2, 0.0, 12.0, hb(2, 0.5, 12.5), can_sample=False)) is Decision.WAIT
    assert p.revived and p.decide(obs(13.0, 2, 0.5, 12.5, hb(2, 0.5, 12.5), can_sample=False)) is Decision.WAIT
    for t, n in ((13.5, 3), (14.0, 4), (14.6, 5)):
        d = p.decide(obs(t, n, 0.0, t - 0.5, hb(n, 0.5, t), can_sample=False))
    assert d is Decision.RUNNING  # three bursts over 2 s after the silence


def test_ranks_not_all_up_hold_running_back_even_at_the_end_of_the_watch():
    p = Policy(watch_s=10, settle_s=3)
    for t in (1.0, 2.0, 3.0, 4.0):
        assert p.decide(obs(t, int(t * 4), 0.1, t, hb(int(t * 4), 0.0, t),
                            unsettled="1 of 2 ranks are alive")) is Decision.WAIT
    assert p.decide(obs(4.5, 18, 0.1, 4.5, hb(18, 0.0, 4.5), settle_checked=False)) is Decision.WAIT  # not now
    assert p.decide(obs(5.0, 20, 0.1, 5.0, hb(20, 0.0, 5.0), ranks_settled_s=1.0)) is Decision.WAIT  # too recent
    assert p.decide(obs(10.0, 40, 0.1, 10.0, hb(40, 0.0, 10.0),
                        unsettled="rank 1 (pid 42) ended while dfdoctor watched")) is Decision.OUT_OF_TIME


def test_a_watch_that_began_late_still_sees_the_silence_before_one_line():
    """CI, under the whole suite's load: the watch began when the job had printed its index lines and had been
    quiet for 11 s; it saw those lines as one growth, then one line a second later, and called the job running
    on the rhythm that line stretched (it died 3 s later). The job's own silence counts, from before the watch."""
    p = Policy(watch_s=40, settle_s=10)
    before = hb(5, -12.5, -11.3)  # five lines over 1.2 s: a burst, no rhythm; silent since
    assert p.decide(obs(0.5, 5, 11.8, 13.0, before, fresh=True)) is not Decision.RUNNING
    after = hb(6, -12.5, 1.3)  # the one line after the silence: a mean interval of 2.8 s now
    assert p.decide(obs(1.5, 6, 0.2, 14.0, after, fresh=True)) is not Decision.RUNNING
    assert p.decide(obs(2.5, 6, 1.2, 15.0, after, fresh=True)) is not Decision.RUNNING


def test_a_watch_that_began_after_the_silence_still_sees_it():
    """CI, 5 of 16 runs under load: the watch's first look came after the job's index lines, its 12 s silence and
    the one line after it; the mean interval (13.5 s over 6 lines: "prints every ~2.3 s") hid the silence and the
    job was called running a second later (it died 3 s after). The recorder notes the silence before the last
    output, so the one line is no pace."""
    p = Policy(watch_s=40, settle_s=10)
    after = hb(7, -14.0, -0.5, gap=12.0)
    for t in (0.5, 1.0, 1.5, 2.0):
        assert p.decide(obs(t, 7, t + 0.5, 14.0 + t, after, fresh=True)) is not Decision.RUNNING
    assert p.revived
    steady = hb(7, -14.0, -0.5, gap=0.3)  # the same lines with no silence before the last: a pace, running
    q = Policy(watch_s=40, settle_s=10)
    assert q.decide(obs(0.5, 7, 1.0, 14.5, steady, fresh=True)) is Decision.RUNNING


def test_the_end_of_a_silence_seen_before_its_line_is_counted_is_not_steady_output():
    """Seen with a recorder's log: 6 lines in the job's first 2 s (three bursts), 12 s of silence, then the log
    changed (silent 0) while the heartbeat still counted 6 lines. The bursts from before the silence made the job
    steady at once and it was called running; it died 3 s later."""
    p = Policy(watch_s=40, settle_s=10)
    for t, n in ((0.3, 1), (1.2, 5), (2.2, 6)):
        p.decide(obs(t, n, 0.0, t - 0.1, hb(n, 0.2, t - 0.1, gap=0.3), can_sample=False))
    for t in (4.0, 8.0, 13.7):
        assert p.decide(obs(t, 6, t - 2.1, t, hb(6, 0.2, 2.1, gap=0.3), can_sample=False)) is Decision.WAIT
    assert p.decide(obs(13.8, 6, 0.0, 13.7, hb(6, 0.2, 2.1, gap=0.3), can_sample=False)) is not Decision.RUNNING
    assert p.revived
    after = hb(7, 0.2, 13.8, gap=11.7)
    for t in (14.3, 15.0, 16.0):
        assert p.decide(obs(t, 7, t - 13.8, t, after, can_sample=False)) is not Decision.RUNNING


def test_a_job_that_printed_every_tenth_of_a_second_and_stopped_is_not_growing_two_seconds_later():
    """Issue 41: ten lines a second for 12 s, then nothing. Two seconds of silence are twenty of its own periods:
    not steady, never RUNNING; the stacks are looked at once it is quiet."""
    p = Policy(watch_s=60, settle_s=10)
    for i in range(1, 24):  # printing, watched from its start, not yet past its settle time
        p.see(obs(i * 0.5, i * 5, 0.05, i * 0.5, hb(i * 5, 0.0, i * 0.5)))
    stopped = hb(120, 0.0, 12.0)  # its last line at 12 s
    assert p.decide(obs(14.0, 120, 2.0, 14.0, stopped)) is Decision.WAIT  # was RUNNING: "its log is growing"
    assert not p.steady
    assert p.decide(obs(17.5, 120, 5.5, 17.5, stopped)) is Decision.SAMPLE


def test_decide_is_small_rules():
    """Policy.decide stays small (issue 41): it asks its rules in turn, each one short."""
    import ast
    import inspect
    import textwrap

    src = textwrap.dedent(inspect.getsource(Policy.decide))
    branches = sum(isinstance(n, (ast.If, ast.For, ast.While, ast.BoolOp, ast.IfExp)) for n in ast.walk(ast.parse(src)))
    assert branches <= 4, branches
