"""Submit a batch job and watch it: scontrol while Slurm holds it, sacct once it has ended, and its output
file, until a rule can speak or the watch runs out."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

from dfdoctor import causes
from dfdoctor.agent.loop_lines import LoopLines, progress_lines
from dfdoctor.agent.record import Masker
from dfdoctor.watch import settle
from dfdoctor.watch.loop import Ended, drive
from dfdoctor.watch.policy import Observation, Policy
from dfdoctor.numbers import is_whole
from dfdoctor.progress import WatchLine, seconds
from dfdoctor.slurm import commands, job, patterns
from dfdoctor.slurm.rules import Seen, judge

POLL_S = 0.2
GROW_S = 2.0  # output that grew within this long before the watch's end still grows (the policy's steady time)
READ_LIMIT = 256 << 10


def submit(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[Optional[str], commands.Answer]:
    """`sbatch --parsable ...` as the user typed it; (job id, what sbatch said)."""
    words = list(argv)
    if "--parsable" not in words:
        words.insert(1, "--parsable")
    try:
        import subprocess
        p = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=commands.TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
        answer = commands.Answer(tuple(words), p.returncode, p.stdout, p.stderr)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, commands.Answer(tuple(words), None, "", str(exc))
    first = answer.out.strip().splitlines()[0] if answer.out.strip() else ""
    job_id = first.split(";")[0]
    return (job_id if answer.ok and is_whole(job_id) else None), answer


def read_tail(path: str) -> tuple[Optional[bool], str]:
    """(exists, its last READ_LIMIT bytes as text) of an output file, read from this host."""
    if not path:
        return None, ""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - READ_LIMIT))
            return True, f.read().decode(errors="replace")
    except FileNotFoundError:
        return False, ""
    except OSError:
        return None, ""


class OutputLoop:
    """The job's loop read from its output file as it grows, as the recorder's heartbeat gives it to a launch:
    a job in its loop is past its start before the settle time ends (dfdoctor.watch.settle.in_its_loop)."""

    def __init__(self) -> None:
        self.path, self.offset, self.partial, self.lines = "", 0, b"", LoopLines()
        self.mask = Masker().value  # the shape shown is masked by the secrets of our environment (the job's)

    def read(self, path: str) -> None:
        """Take in what was added to `path` since the last read (at most READ_LIMIT bytes: the newest)."""
        if path != self.path:
            self.path, self.offset, self.partial, self.lines = path, 0, b"", LoopLines()
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self.offset or size - self.offset > READ_LIMIT:  # truncated, or too much to read
                    self.offset, self.partial = max(0, size - READ_LIMIT), b""
                f.seek(self.offset)
                data = f.read(READ_LIMIT)
        except OSError:
            return
        self.offset += len(data)
        lines, self.partial = progress_lines(self.partial, data)
        now = time.time()
        for line in lines:
            self.lines.add(line, now)

    def heartbeat(self, pace: dict[str, Any]) -> dict[str, Any]:
        """The output's pace with its loop, as the recorder's heartbeat carries them (for the settle rules)."""
        return dict(pace, loop=self.lines.best(self.mask))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


PATTERN_KEYS = ("output_pattern", "error_pattern")


def true_paths(f: job.JobFacts, paths: dict[str, str]) -> None:
    """Where the job really writes, from the --output/--error patterns as submitted: scontrol's StdOut keeps
    `%%`, widths and backslashes as typed (a cruder expansion than slurmstepd's), so it can name a file the job
    never wrote. Unchanged when no pattern was recorded or a letter has no value yet (a pending array)."""
    pat, r = paths.get("output_pattern"), f.raw
    if not r:
        return
    if not pat:  # a job dfdoctor did not submit: scontrol's name, with what its crude expansion left resolved
        _resolve_what_scontrol_left(f)
        return
    array = bool(r.get("ArrayTaskId"))
    task = r.get("ArrayTaskId") if array and r.get("ArrayTaskId", "").isdigit() else None
    host = r.get("BatchHost", "")
    known = dict(job_name=r.get("JobName", ""), user=r.get("UserId", "").split("(")[0] or None,
                 job_id=r.get("JobId"), node=host if host and host != "(null)" else None,
                 array_job=r.get("ArrayJobId") if array else None, array_task=task, array=array)
    workdir = r.get("WorkDir") or paths.get("workdir") or ""
    for key, p in (("stdout", pat), ("stderr", paths.get("error_pattern") or pat)):
        name = patterns.resolve(p, **known)
        if name is not None:
            setattr(f, key, name if name.startswith("/") else os.path.join(workdir, name))


def _resolve_what_scontrol_left(f: job.JobFacts) -> None:
    """scontrol substitutes only a bare %A %a %j %u %x and keeps the rest as typed (`%%`, `%5j`, `%N`), so its
    StdOut resolved once more is the file slurmstepd wrote. Not with a backslash: scontrol has already put
    values where slurmstepd took the name literally, and what was literal cannot be told any more."""
    r = f.raw
    host = r.get("BatchHost", "")
    array = bool(r.get("ArrayTaskId"))
    known = dict(job_name=r.get("JobName", ""), user=r.get("UserId", "").split("(")[0] or None,
                 job_id=r.get("JobId"), node=host if host and host != "(null)" else None,
                 array_job=r.get("ArrayJobId") if array else None,
                 array_task=r.get("ArrayTaskId") if r.get("ArrayTaskId", "").isdigit() else None, array=array)
    for key in ("stdout", "stderr"):
        name = getattr(f, key)
        if "%" in name and "\\" not in name:
            setattr(f, key, patterns.resolve(name, **known) or name)


def look(job_id: str, paths: dict[str, str], *, settle: bool = False) -> Seen:
    """The job and its output files as they are now; `paths` are the StdOut/StdErr/WorkDir recorded at submit
    (scontrol forgets them after MinJobAge, sacct 22.05 never has them) and the patterns they came from. An
    array job with a failed task is read with that task: its own facts and output file."""
    f = job.settle(job_id) if settle else job.facts(job_id, with_sacct=False)
    true_paths(f, paths)
    for key in ("stdout", "stderr", "workdir"):
        if not getattr(f, key) and paths.get(key):
            setattr(f, key, paths[key])
    if not f.known or (f.ended and "sacct" not in f.source):
        if not settle:
            # facts read again are scontrol's names again: where slurmstepd wrote is resolved for them too (a job
            # that ended before this look was read at `logs\new/x.out`, a folder that exists, not `logsnew/`)
            f = job.settle(job_id, 0.0)
            true_paths(f, paths)
        for key in ("stdout", "stderr", "workdir"):
            if not getattr(f, key) and paths.get(key):
                setattr(f, key, paths[key])
    out_exists, out = read_tail(f.stdout)
    err_exists, err = (out_exists, out) if f.stderr == f.stdout else read_tail(f.stderr)
    seen = Seen(job=f, stdout_text=out, stderr_text=err, stdout_exists=out_exists, stderr_exists=err_exists)
    if f.failed_tasks:
        seen.task = look(f.failed_tasks[0].job, {k: paths[k] for k in PATTERN_KEYS if paths.get(k)},
                         settle=True)
    return seen


def _ran_s(f: job.JobFacts) -> float:
    """How long Slurm says the job has run (RunTime), 0 when it did not say."""
    m = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$", f.run_time or "")
    if not m:
        return 0.0
    d, h, mi, sec = (int(x) if x else 0 for x in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + sec)


def quiet_for(path: str, ours: float) -> float:
    """Seconds the output file has not changed: the longer of what we watched (`ours`: since we saw it change)
    and its age by mtime (the writer's clock; an empty file's mtime is the job's start). A file that does not
    exist has only our own watch."""
    try:
        by_mtime = time.time() - os.path.getmtime(path)
    except OSError:
        by_mtime = 0.0
    return max(ours, by_mtime)


def _waiting_for(first_output: Optional[float], now: float, hb: dict[str, Any], settle_s: float, node: str) -> str:
    """What the watch of a running job waits for, in the words of the progress line."""
    on = f" on {node}" if node and node != "(null)" else ""
    if first_output is None:
        return f"running{on}: waiting for its first output"
    ending = settle.about_to_end(hb, settle_s)
    if ending is not None:
        return f"running{on}: {ending}: waiting for what follows"
    return f"running{on}: waiting for {settle_s:g} s of steady output ({seconds(min(now - first_output, settle_s))} so far)"


def _queue_words(f: job.JobFacts) -> str:
    """Where Slurm holds a job that does not run yet, for the progress line."""
    if f.state == "PENDING":
        return f"in Slurm's queue ({f.reason})" if f.reason and f.reason != "None" else "in Slurm's queue"
    return f"Slurm says {f.state or 'nothing yet'}"


def watch(job_id: str, paths: dict[str, str], watch_s: float,
          on_event: Callable[[str, dict], None] = lambda name, data: None,
          sampler: Optional[Callable[[str, str, float], Any]] = None, settle_s: float = 0.0) -> Seen:
    """Poll until the job ended (then settle sacct), pends for a reason that never clears, or runs with its
    output growing; at the latest after `watch_s` seconds. With a `sampler` (onnode.look), a running job whose
    output stays quiet is looked at on its node: a wait its stacks prove ends the watch. Growing output counts
    as running only once the job has printed for `settle_s` (from the first output we saw; never past the watch):
    a job that prints a line and then waits is looked at, not called running after its first line, and one
    whose Python and CUDA take 6 s to come up is not called running 4 s into its start. The watch is the one of
    every job (dfdoctor.watch.loop, its policy dfdoctor.watch.policy); `SlurmSource` is what it sees."""
    line = WatchLine()
    source = SlurmSource(job_id, paths, watch_s, on_event, sampler, settle_s)
    try:
        return drive(source, Policy(watch_s, settle_s, GROW_S), line, POLL_S)
    finally:
        line.close()  # before the verdict: nothing of the progress line stays above it


class SlurmSource:
    """The watch's source (dfdoctor.watch.loop.Source) for a Slurm job: scontrol while Slurm holds it, sacct once
    it ended (the watch's end), its output file as it grows (counted as the recorder's heartbeat counts a
    launch's lines: each growth seen is one line of its pace, its loop read from what was added), and a look at
    its processes on its node (`sampler`). Only Slurm's own states are its rules: the queue, an end."""

    def __init__(self, job_id: str, paths: dict[str, str], watch_s: float, on_event: Callable[[str, dict], None],
                 sampler: Optional[Callable[[str, str, float], Any]], settle_s: float) -> None:
        self.job_id, self.paths, self.watch_s, self.on_event = job_id, paths, watch_s, on_event
        self.sampler, self.settle_s = sampler, max(0.0, min(settle_s, watch_s))
        self.facts: Optional[job.JobFacts] = None  # scontrol's, as the last observation read them
        self.last_state: Optional[str] = None
        self.out, self.size, self.node, self.stacks_where = "", -1, "", ""
        self.changed: Optional[tuple[float, int]] = None  # (when we saw the output's size last change, that size)
        self.grown_at: Optional[float] = None  # when we last saw it grow
        self.first_output: Optional[float] = None  # when we first saw the output file hold something
        self.pace: dict[str, Any] = {}  # the output's growth as the recorder's heartbeat counts lines: its rhythm
        self.loop = OutputLoop()
        self.node_look = None  # onnode.NodeLook: the last look on its node

    def observe(self, t: float) -> Union[Observation, Ended, str]:
        """The job as scontrol says it is now: ended (sacct settles it), in the queue, or running."""
        f = self.facts = job.facts(self.job_id, with_sacct=False)
        if f.state != self.last_state:
            self.on_event("slurm-state", {"state": f.state, "reason": f.reason, "nodes": f.nodes})
            self.last_state = f.state
        if f.ended or not f.known or f.failed_tasks:  # one failed task fails an array: no need to wait
            seen = look(self.job_id, self.paths, settle=True)
            self.on_event("slurm-ended", {"state": seen.job.state, "exit_code": seen.job.exit_code,
                                          "end_time": seen.job.end_time})
            return Ended(seen)
        if f.state == "PENDING":
            seen = look(self.job_id, self.paths)
            if judge(seen).cause or t >= self.watch_s:  # pending for a reason that never clears
                return Ended(seen, _queue_words(f))
        if f.state != "RUNNING":
            return Ended(self._seen(t)) if t >= self.watch_s else _queue_words(f)
        return self._output(t, f)

    def _output(self, t: float, f: job.JobFacts) -> Observation:
        """What the running job's output file shows now."""
        self.out = f.stdout or self.paths.get("stdout", "")
        self._count_growth(t, _size(self.out))
        self.node = (f.raw.get("BatchHost") or "").strip()
        self.stacks_where = f" on {self.node}" if self.node else ""
        talking = t - self.first_output if self.first_output is not None else 0.0
        return Observation(t=t, alive=True, progress=int(self.pace.get("progress_lines") or 0),
                           silent_s=quiet_for(self.out, t - self.changed[0]), talking_s=talking,
                           heartbeat=self.loop.heartbeat(self.pace), fresh=True, wrote=self.size > 0,
                           can_sample=self.sampler is not None and self.node not in ("", "(null)"))

    def _count_growth(self, t: float, size: int) -> None:
        """Take in the output file's size now: each growth seen is one line of its pace, as the recorder's
        heartbeat counts a launch's lines, and what was added is read for the job's loop."""
        self.size = size
        if size > 0 and self.first_output is None:
            self.first_output = t  # the settle time counts from here: starting Python and CUDA is not running
        # grown: more bytes than it held; a file that only came into being (slurmstepd makes it a moment after
        # RUNNING, later on a loaded node) holds none and is no progress
        if self.changed is not None and size > max(self.changed[1], 0):
            self.pace["progress_lines"] = int(self.pace.get("progress_lines") or 0) + 1
            self.pace.setdefault("first_output_t", time.time())
            self.pace["last_output_t"] = time.time()
            self.loop.read(self.out)
            self.grown_at = t
        if self.changed is None or self.changed[1] != size:
            self.changed = (t, size)

    def settle(self, o: Observation, steady: bool) -> None:
        """Nothing to settle beyond the output: Slurm starts the job's processes, the batch script its ranks."""

    def waiting_for(self, o: Observation, steady: bool) -> str:
        """What the watch waits for, in the words of the progress line."""
        return _waiting_for(self.first_output, o.t, o.heartbeat, self.settle_s, self.node)

    def sample(self, o: Observation) -> Optional[Seen]:
        """A look at its processes on its node: the job with the wait it proves, or None (watch on)."""
        self.node_look = look_ = self.sampler(self.job_id, self.node, o.silent_s)
        self.on_event("stacks-sampled", {"node": self.node, "took_s": round(look_.took_s, 2),
                                         "processes": len(look_.samples), "quiet_s": round(o.silent_s, 1),
                                         "finding": look_.finding.cause if look_.finding else None,
                                         "error": look_.error})
        if look_.finding is not None and _size(self.out) != self.size:
            look_.finding = None  # it wrote while we looked: the wait we saw follows output
        if look_.finding is None or look_.finding.cause == causes.COMPILE_WORKERS_WAIT:
            return None  # (a compile ends by itself or shows its lock cycle: that wait is the verdict only at the end)
        seen = self._seen(o.t)
        seen.quiet_s = o.silent_s
        return seen

    def running(self, o: Observation, looping: Optional[str]) -> Seen:
        """The job with its output growing (and the loop that showed it past its start)."""
        seen = look(self.job_id, self.paths)
        seen.growing, seen.watched_s = True, o.t
        seen.notes = seen.notes + ([f"ran {_ran_s(self.facts):.0f} s; {looping}"] if looping else [])
        return seen

    def out_of_time(self, o: Observation) -> Seen:
        """The job as it is at the watch's end, its output growing if it grew in the last GROW_S."""
        seen = self._seen(o.t)
        # grown within the last GROW_S: growing, though too briefly for the policy to call it steady
        seen.growing = self.grown_at is not None and o.t - self.grown_at < GROW_S
        seen.quiet_s = o.silent_s
        return seen

    def _seen(self, t: float) -> Seen:
        """The job and its files as they are now, with what the watch saw: for how long it has watched the output
        not grow, and its last look on the node."""
        seen = look(self.job_id, self.paths)
        seen.watched_s = t - self.grown_at if self.grown_at is not None else t
        seen.grew = self.grown_at is not None  # progress seen, even if not in the watch's last GROW_S
        seen.quiet_s = quiet_for(self.out or seen.job.stdout, seen.watched_s)  # as the file shows it
        seen.node_look = self.node_look
        return seen
