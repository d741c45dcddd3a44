"""Watch a job started under the flight recorder (launch/spawn.py) until its verdict is certain."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from dfdoctor import causes
from dfdoctor.agent.procfs import buffers_stdout, job_outputs, proc_state
from dfdoctor.diagnose import own_files, stacks
from dfdoctor.launch.lookahead import AHEAD_S, LookAhead
from dfdoctor.launch.report import prepare_page
from dfdoctor.launch.reading import clock, judge, own_log
from dfdoctor.launch.spawn import START_TIMEOUT_S
from dfdoctor.watch import rhythm, settle
from dfdoctor.watch.loop import Ended, drive
from dfdoctor.watch.policy import STEADY_S, Observation, Policy
from dfdoctor.progress import WatchLine, seconds
from dfdoctor.run import record
from dfdoctor.run.folder import RunFolder
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord

if TYPE_CHECKING:  # start-up: a look at a live job's stacks (and psutil) is imported when one is taken (`observe`):
    # a job that ends in a moment needs none of it (0.01-0.02 of a launch's CPU-seconds, issue 45)
    import psutil
    from dfdoctor.diagnose.jobstacks import Round

POLL_S = 0.05  # how often the watcher reads the record: bounds the verdict's latency after a death


def progress(run: RunRecord) -> int:
    """How far the job's logging has come: lines that show progress (warnings and tracebacks do not), or
    (with --no-redirect) the bytes its own log grew by."""
    hb = run.heartbeat or {}
    initial = run.first("log-initial")
    if not run.spec.get("redirect", True) and hb.get("log_size") is not None and initial:
        return max(0, hb["log_size"] - (initial.get("size") or 0)) + int(hb.get("progress_lines") or 0)
    return int(hb.get("progress_lines") or 0)


Sampler = Callable[[RunRecord, float], Optional[LiveFacts]]  # a quiet live job: facts when its stacks name a wait


def watch(source: "RunSource") -> tuple[RunRecord, Optional[LiveFacts]]:
    """Follow a launched run's record until the verdict is certain: a death, a settled job with steady output, a
    wait that the stacks of all its processes prove (two looks a second apart), or the end of the watch. The
    source says where the run is read: this machine (`RunSource`), or a --target (`launch/remote.TargetSource`)."""
    t0 = time.monotonic()
    source.line = WatchLine()  # from now: it says how long the watch has run
    prepare_page()  # the report's page is compiled while the watch waits
    try:
        return drive(source, Policy(source.watch_s, source.settle_s, source.steady_s), source.line, source.poll_s)
    except KeyboardInterrupt:  # Ctrl-C ends the watch, not the job: judge what we have
        source.line.close()
        run = source.load()
        return run, (None if run.finished else source.look(run, time.monotonic() - t0))
    finally:
        source.ahead.close()  # a look ahead under way ends here: nothing of it stays running
        source.line.close()  # before the verdict: nothing of the line stays above it


class RunSource:
    """The watch's source (dfdoctor.watch.loop.Source) for a run launched on this machine: its record in the run
    folder, its processes in /proc, their stacks with py-spy. It ends the watch itself where the record says so:
    the job ended, its recorder is gone or never started, what a launcher handed off to shows no output.

    Where the run is read is said by four methods (`load`, `look`, `look_for_wait`, `ranks_unsettled`, with
    `can_sample`); a run on a --target is the source that reads them there (`launch/remote.TargetSource`).
    `settle_s` (capped at the watch) is how long a job must have lived before it is called running; `sample`
    looks at a quiet job's stacks (default: every process of its tree with py-spy, when there is one)."""

    stacks_where = ""
    poll_s = POLL_S  # between two reads of the record

    def __init__(self, run_dir: Path, proc: Optional[subprocess.Popen], watch_s: float, *,
                 steady_s: float = STEADY_S, settle_s: float = settle.SETTLE_S,
                 sample: Optional[Sampler] = None) -> None:
        self.run_dir, self.proc, self.line = run_dir, proc, WatchLine(enabled=False)  # watch() gives it one
        self.watch_s, self.steady_s, self.settle_s = watch_s, steady_s, max(0.0, min(settle_s, watch_s))
        self.sampler = sample or (sample_stuck if stacks.py_spy() else None)
        self.wall0 = time.time()
        self.run: Optional[RunRecord] = None  # as the last observation read it
        self.handoff: Optional[tuple[float, int]] = None  # (when, progress) as we saw the command exit and hand off
        self.settling = settle.Settling()
        self.unsettled: Optional[str] = None
        self.last_settle_check = -1.0
        self.ahead = LookAhead()  # the first round of the look `running` waits for, taken as the job ripens
        self.reader = record.Rereader()  # the folder as last read: what did not change is not read again

    # where the run is read: here (a TargetSource reads them on its target)

    def load(self) -> RunRecord:
        """The run as its record says it is now."""
        return self.reader.load(self.run_dir)

    def look(self, run: RunRecord, watched_s: float) -> Optional[LiveFacts]:
        """A look at the live job (None: it is not alive)."""
        return observe(run, watched_s)

    @property
    def can_sample(self) -> bool:
        """Whether the stacks of its processes can be looked at."""
        return self.sampler is not None

    def look_for_wait(self, run: RunRecord, watched_s: float) -> Optional[LiveFacts]:
        """A look at the stacks of a quiet job: its facts when they prove a wait, else None."""
        return self.sampler(run, watched_s) if self.sampler is not None else None

    def ranks_unsettled(self, run: RunRecord, state: settle.Settling, deep: bool) -> Optional[str]:
        """Why not every rank is up and past init_process_group yet (None: settled, or nothing to wait for)."""
        return settle.settled(run.job_pid, state, deep) if run.job_pid else None

    # the watch's source

    def observe(self, t: float) -> Union[Observation, Ended, str]:
        """The run as its record (here, or mirrored from the target) says it is now."""
        run = self.run = self.load()
        said = self._no_live_job(run, t)
        if said is not None:
            return said
        done = progress(run)
        if self._handed_off_in_vain(run, t, done):
            return Ended((run, None))
        if self.watch_s <= 0:  # --watch 0: started is all we wait for
            return Ended((run, LiveFacts(pid=run.job_pid, watched_s=0.0)))
        hb = run.heartbeat or {}
        silent = rhythm.silent_for(hb, clock(run), run.spawned.get("t"), own_log(run))
        # the rhythm counts only from a heartbeat written since the watch began: the recorder lives now
        return Observation(t=t, alive=run.job_alive(), progress=done, silent_s=silent, talking_s=_talking_for(run),
                           heartbeat=hb, fresh=(hb.get("t") or 0) > self.wall0,
                           can_sample=self.can_sample, wrote=bool(hb.get("last_output_t") or done))

    def _no_live_job(self, run: RunRecord, t: float) -> Optional[Union[Ended, str]]:
        """What the record says when there is no live job to observe: it ended, its recorder is gone or never
        started (the watch's end), or it is starting (words for the progress line). None: a job to observe."""
        if run.finished:
            if _left_running(run) and _age(run) < self.settle_s and t < self.watch_s:
                return "its command exited 0: waiting for what it left running"  # the trainer too must settle
            return Ended((run, None))
        recorder_gone = (self.proc.poll() is not None) if self.proc is not None else \
            (run.recorder is not None and not run.recorder_alive())
        if recorder_gone or (run.recorder is None and t > START_TIMEOUT_S):
            return Ended((self.load(), None))
        if run.spawned is None:
            return "starting the job"
        return None

    def _handed_off_in_vain(self, run: RunRecord, t: float, done: int) -> bool:
        """The command exited and handed its output pipes on; what holds them (a daemon, or only a stray worker)
        must show it works: output within steady_s, or the verdict is given on the command's own exit without
        waiting out the watch."""
        if not run.handoff_open:
            return False
        self.handoff = self.handoff or (t, done)
        return done <= self.handoff[1] and t - self.handoff[0] >= self.steady_s

    def settle_is_cheap(self) -> bool:
        """Whether asking the settler costs no session and no stack look while no rank was seen (here: a walk
        of the job's tree)."""
        return True

    def settle(self, o: Observation, steady: bool) -> None:
        """Ask the settler once a second whether every rank is up and past init_process_group; at once when
        the output is steady and the job past its start, while it has seen no rank and asking is cheap:
        `running` needs the answer on its very observation, and waiting for the second put it up to a second
        late (issue 45). (Not on every observation: the walk of the job's tree reads every process here.)"""
        ripe = steady and settle.ripe_within(o.heartbeat, o.talking_s, 0.0, self.settle_s)
        every = 0.0 if ripe and not self.settling.ranks_seen and self.settle_is_cheap() else 1.0
        if o.t - self.last_settle_check >= every and o.alive:
            self.last_settle_check = o.t
            self.unsettled = self.ranks_unsettled(self.run, self.settling, steady)  # a rank that dies is seen to go
        o.unsettled = self.unsettled
        o.settle_checked = self.last_settle_check == o.t
        o.ranks_settled_s = None if self.settling.since is None else time.time() - self.settling.since
        # (lookahead.py) from before the output counts as steady (2 s of it), which came a gap or less before
        # the loop's 3 s: the first round was then younger than a gap when the job ripened; still growing, so
        # that a burst of lines followed by silence costs a round or two, not one every two seconds
        if o.alive and self.sampler is sample_stuck and self.run.job_pid and \
                rhythm.still_growing(o.heartbeat, o.silent_s) and \
                settle.ripe_within(o.heartbeat, o.talking_s, AHEAD_S, self.settle_s):
            self.ahead.keep_fresh(self.run.job_pid)

    def waiting_for(self, o: Observation, steady: bool) -> str:
        """What the watch waits for, in the words of the progress line."""
        return _waiting_for(self.run, o.heartbeat, o.progress, steady, self.settle_s, self.unsettled)

    def sample(self, o: Observation) -> Optional[tuple[RunRecord, LiveFacts]]:
        """A look at the stacks of every process: the run and the wait it proves, unless the job wrote meanwhile
        or only compiles (then None: watch on)."""
        facts = self.look_for_wait(self.run, o.t)
        if own_files.grew_as_looked(self.run, facts):  # its own log grew as we looked
            return (self.load(), facts) if _age(self.run) >= self.settle_s else None  # running, past its start
        if facts is not None and _last_output(self.load()) != _last_output(self.run):
            return None  # it wrote while we looked: the wait we saw follows output, it explains no silence
        if facts is not None and not _compiling(facts):  # a compile ends by itself, or shows its cycle
            return self.load(), facts
        return None

    def running(self, o: Observation, looping: Optional[str]) -> Optional[tuple[RunRecord, Optional[LiveFacts]]]:
        """A settled job: running, after one look at the stacks of every process (two samples a second apart):
        threads in a compile-lock cycle while other threads still print (the bundled trainer without its guard, on
        an H200) are a deadlock, not a running job; a job that ended during the look is judged by its end."""
        if not self.can_sample:
            return self.run, _running(self.run, o.t, self.settle_s, self.settling, looping)
        self.line.say("it looks settled; one look at the stacks of its processes first", force=True)
        ahead = self.ahead.take()
        facts = sample_stuck(self.run, o.t, ahead) if ahead is not None and self.sampler is sample_stuck else \
            self.look_for_wait(self.run, o.t)
        run = self.load()
        if facts is not None and facts.classified is not None:
            return run, facts
        if run.finished:
            return run, None
        if not rhythm.still_growing(run.heartbeat, rhythm.silent_for(run.heartbeat, clock(run),
                                                                    (run.spawned or {}).get("t"), own_log(run))):
            return None  # its output stopped while we looked: never called growing after that (issue 41)
        return run, _running(run, o.t, self.settle_s, self.settling, looping)

    def out_of_time(self, o: Observation) -> Optional[tuple[RunRecord, Optional[LiveFacts]]]:
        """A last look at the live job; None while a job that just died has its end on the way."""
        facts = self.look(self.run, o.t)
        if facts is not None:
            facts.unsettled = self.unsettled
        if facts is not None or o.t >= self.watch_s + 2.0:  # None: it just died, its exit is on the way
            return self.run, facts
        return None


def _settled_facts(facts: Optional[LiveFacts]) -> Optional[LiveFacts]:
    """A look's facts when they name a wait (a lock cycle or a stuck finding), else None."""
    if facts is not None and (facts.classified or facts.stuck is not None):
        return facts
    return None


def _left_running(run: RunRecord) -> bool:
    """The command exited 0 leaving processes that write a log of their own, and one of them still runs here."""
    ex = run.exit or {}
    left = ex.get("left_writing") or []
    if not (left and ex.get("exit_code") == 0 and not run.is_remote):
        return False
    from dfdoctor.diagnose import launcher  # start-up: see TYPE_CHECKING above
    return launcher.still_running(left)


def _age(run: RunRecord) -> float:
    """Seconds the job has lived (from the recorder's spawn event, on the job's machine's clock)."""
    t = (run.spawned or {}).get("t")
    return max(0.0, clock(run) - t) if t else 0.0


def _compiling(facts: LiveFacts) -> bool:
    """The stacks show the job waiting for torch.compile's workers and no lock cycle: compiling can take
    minutes (18-32 s for the bundled trainer on an H200), so the watch goes on, sampling again, until the
    compile ends, a cycle shows (compile-deadlock), or the watch ends (then this wait is the verdict)."""
    return facts.classified is None and facts.stuck is not None and facts.stuck.cause == causes.COMPILE_WORKERS_WAIT


def _last_output(run: RunRecord) -> Optional[float]:
    """When the job last wrote: as its recorder saw it (the heartbeat, rewritten each second) or, here, as its
    log's last change shows it (the recorder writes there at once, and so does a job that keeps its own log)."""
    last = (run.heartbeat or {}).get("last_output_t")
    log = own_log(run)
    if log:
        try:
            last = max(last or 0.0, os.stat(log).st_mtime)
        except OSError:
            pass
    return last


def _talking_for(run: RunRecord) -> float:
    """Seconds since the job's first output (its age, before it printed anything): a start that spends its first
    seconds importing torch and bringing CUDA up has not begun the part where start-up failures show."""
    first = (run.heartbeat or {}).get("first_output_t")
    return max(0.0, clock(run) - first) if first else _age(run)


def _waiting_for(run: RunRecord, hb: dict[str, Any], done: int, steady: bool, settle_s: float,
                 unsettled: Optional[str]) -> str:
    """What the watch waits for now, in the words of the progress line."""
    if not done and not hb.get("first_output_t"):
        return "waiting for its first output"
    if unsettled is not None:
        return f"waiting for all its processes to start ({unsettled})"
    ending = settle.about_to_end(hb, settle_s)
    if ending is not None:
        return f"{ending}: waiting for what follows"
    if not steady:
        return "waiting for its output to come steadily"
    return f"waiting for {settle_s:g} s of steady output ({seconds(min(_talking_for(run), settle_s))} so far)"


def _running(run: RunRecord, watched_s: float, settle_s: float, settling: settle.Settling,
             looping: Optional[str]) -> LiveFacts:
    """The facts of a job that is running: growing at its rhythm, settled (`looping`: the evidence that it is
    in its loop, when that, not the settle time, showed it past its start)."""
    facts = LiveFacts(pid=run.job_pid, watched_s=watched_s, growing=True)
    talking = _talking_for(run)
    past = f"; {looping}" if looping is not None and talking < settle_s else \
        f" (running is said after {settle_s:g} s of output)"
    facts.notes = [f"it has printed for {talking:.0f} s{past}", f"it {rhythm.pace_words(run.heartbeat)}"] + \
        settling.notes
    return facts


def observe(run: RunRecord, watched_s: float, ahead: Optional[Round] = None) -> Optional[LiveFacts]:
    """Look into a live job: the stacks and kernel waits of every process of its tree (twice, a second apart;
    `ahead`: the first of the two, taken already), where its stdout goes, what files it writes."""
    pid = run.job_pid
    if pid is None or not run.job_alive():
        return None
    import psutil  # start-up: see TYPE_CHECKING above
    from dfdoctor.diagnose import jobstacks
    facts = LiveFacts(pid=pid, watched_s=watched_s)
    facts.unreaped = unreaped(pid, (run.recorder or {}).get("pid"))
    if facts.unreaped is not None:
        return facts  # it has ended: a zombie has no stack, no output and no file left to look at
    before = _written_files(run, pid)  # sized again after the stacks' look: a file the job writes, seen growing
    # Without py-spy the looks still see each thread's kernel state, its CPU time and its wake-ups: a job that
    # spends CPU is seen to move, where an unsampled one would be called still ("no CPU spent").
    samples = jobstacks.sample_job(pid, ahead=ahead)
    if samples:
        facts.stacks = [s.last.stacks for s in samples if s.python and s.last is not None][:stacks.MAX_PROCESSES * 4]
    else:
        facts.stacks = stacks.dump_tree(pid)
    judge(run, facts, samples)
    tree = stacks.family(pid)
    outputs = job_outputs([p.pid for p in tree], run.dir, run.spec.get("log"), pid, sizes=True)
    facts.stdout_targets = [tuple(s) for s in outputs["streams"]]
    facts.other_logs = [tuple(f) for f in outputs["files"]]
    facts.grew = own_files.grown(before, own_files.sizes(outputs["files"]))  # sized just now, after the stacks
    for p in tree:
        _look_at_python(p, facts)
    try:
        t = psutil.Process(pid).cpu_times()
        facts.cpu_s = t.user + t.system
    except psutil.Error:
        pass
    return facts


def unreaped(pid: int, recorder: Optional[int]) -> Optional[str]:
    """Why the job's process, ended and a zombie, has not been reaped, in words (None: it is no zombie): the
    states /proc gives them, read as a target's agent reads them there (diagnose/unreaped.why)."""
    if proc_state(pid) != "Z":
        return None
    from dfdoctor.diagnose.unreaped import why as unreaped_why  # start-up: see TYPE_CHECKING above
    return unreaped_why(recorder, proc_state(recorder) if recorder else None)


def sample_stuck(run: RunRecord, watched_s: float, ahead: Optional[Round] = None) -> Optional[LiveFacts]:
    """Sample a quiet job's processes; its facts when the stacks prove a wait (a lock cycle, a rank missing, a
    lock, stdin...), else None (keep watching). `ahead`: the look's first round, taken already."""
    t = time.monotonic()
    facts = observe(run, watched_s, ahead)
    if facts is not None:  # each look is noted: how long sampling took, what it showed (latency, debugging)
        from dfdoctor.diagnose import stuck  # start-up: see TYPE_CHECKING above
        finding = facts.stuck.cause if facts.stuck else (facts.classified or [None])[0]
        RunFolder.at(run.dir).append_event("stacks-sampled", took_s=round(time.monotonic() - t, 2),
                                           processes=len(facts.job), quiet_s=round(facts.quiet_s or 0.0, 1),
                                           waits=[s.wait.kind for s in stuck.seen(facts.job)], finding=finding,
                                           **({"first_round_s_before": round(t - ahead.began, 2)}
                                              if ahead is not None and ahead.used else {}))
    if own_files.grew_as_looked(run, facts):
        return facts  # no --log, and a file the job writes grew as we looked: its own log, progress (own_files)
    return _settled_facts(facts)


def _written_files(run: RunRecord, pid: int) -> own_files.Sizes:
    """The log-like files the job's processes have open for writing, each with its size, now."""
    files = job_outputs([p.pid for p in stacks.family(pid)], run.dir, run.spec.get("log"), pid, sizes=True)["files"]
    return own_files.sizes(files)


def _look_at_python(p: psutil.Process, facts: LiveFacts) -> None:
    """Notes a Python process, and its block-buffered stdout unless it is stuck (then buffering explains
    nothing)."""
    import psutil  # start-up: see TYPE_CHECKING above
    from dfdoctor.diagnose.look import blocked
    try:
        cmd = p.cmdline()
        exe = os.path.basename(p.exe() or (cmd[0] if cmd else ""))
        environ = p.environ()
    except psutil.Error:
        return
    if "python" not in exe:
        return
    facts.python = True
    if buffers_stdout(p.pid, cmd, environ) and not blocked(facts):
        facts.buffered = True
