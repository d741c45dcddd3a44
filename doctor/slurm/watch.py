"""Submit a batch job and watch it: scontrol while Slurm holds it, sacct once it has ended, and its output
file, until a rule can speak or the watch runs out."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Optional

from dfdoctor import causes
from dfdoctor.agent.loop_lines import LoopLines, progress_lines
from dfdoctor.agent.record import Masker
from dfdoctor.watch import rhythm, settle
from dfdoctor.numbers import is_whole
from dfdoctor.progress import WatchLine, seconds
from dfdoctor.slurm import commands, job, patterns
from dfdoctor.slurm.rules import Seen, judge

POLL_S = 0.2
GROW_S = 2.0  # how long a running job's output is watched for growth
# output quiet past its own rhythm (rhythm.sample_after: 3 of its intervals, at least 5 s, at most 15 s): the
# job's processes are looked at on its node
SAMPLE_EVERY_S = 5.0  # and again after as long, while it stays quiet (each look costs its node ~1-2 s)
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
        f = job.settle(job_id, 0.0) if not settle else f
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


def quiet_for(path: str, since_seen: Optional[float]) -> float:
    """Seconds the output file has not changed: the longer of what we watched (`since_seen`, our clock) and
    its age by mtime (the writer's clock; an empty file's mtime is the job's start). A file that does not
    exist has only our own watch."""
    ours = time.monotonic() - since_seen if since_seen is not None else 0.0
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


def watch(job_id: str, paths: dict[str, str], watch_s: float,
          on_event: Callable[[str, dict], None] = lambda name, data: None,
          sampler: Optional[Callable[[str, str, float], Any]] = None, settle_s: float = 0.0) -> Seen:
    """Poll until the job ended (then settle sacct), pends for a reason that never clears, or runs with its
    output growing; at the latest after `watch_s` seconds. With a `sampler` (onnode.look), a running job whose
    output stays quiet is looked at on its node: a wait its stacks prove ends the watch. Growing output counts
    as running only once the job has printed for `settle_s` (from the first output we saw; never past the watch):
    a job that prints a line and then waits is looked at, not called running after its first line, and one
    whose Python and CUDA take 6 s to come up is not called running 4 s into its start."""
    line = WatchLine()
    try:
        return _watch(job_id, paths, watch_s, on_event, sampler, settle_s, line)
    finally:
        line.close()  # before the verdict: nothing of the progress line stays above it


def _watch(job_id: str, paths: dict[str, str], watch_s: float, on_event: Callable[[str, dict], None],
           sampler: Optional[Callable[[str, str, float], Any]], settle_s: float, line: WatchLine) -> Seen:
    """The watch loop itself, its progress shown on `line`."""
    start = time.monotonic()
    end = start + watch_s
    last_state = None
    grow_from: Optional[tuple[float, int]] = None
    changed: Optional[tuple[float, int]] = None  # (when we saw the output's size last change, that size)
    last_sample: Optional[float] = None
    node_look = None
    pace: dict[str, Any] = {}  # the output's growth as the recorder's heartbeat counts lines: its rhythm
    loop = OutputLoop()
    first_output: Optional[float] = None  # when we first saw the output file hold something (our clock)
    revived: Optional[float] = None  # when its output came back after a silence longer than its quiet time
    while True:
        f = job.facts(job_id, with_sacct=False)
        if f.state != last_state:
            on_event("slurm-state", {"state": f.state, "reason": f.reason, "nodes": f.nodes})
            last_state = f.state
        if f.ended or not f.known or f.failed_tasks:  # one failed task fails an array: no need to wait
            seen = look(job_id, paths, settle=True)
            on_event("slurm-ended", {"state": seen.job.state, "exit_code": seen.job.exit_code,
                                     "end_time": seen.job.end_time})
            return seen
        if f.state != "RUNNING":
            line.say(f"in Slurm's queue ({f.reason})" if f.state == "PENDING" and f.reason and f.reason != "None"
                     else "in Slurm's queue" if f.state == "PENDING" else f"Slurm says {f.state or 'nothing yet'}")
        if f.state == "PENDING":
            seen = look(job_id, paths)
            if judge(seen).cause or time.monotonic() >= end:
                return seen
        if f.state == "RUNNING":
            out = f.stdout or paths.get("stdout", "")
            size = _size(out)
            now = time.monotonic()
            if size > 0 and first_output is None:
                first_output = now  # the settle time counts from here: starting Python and CUDA is not running
            if changed is None or changed[1] != size:
                if changed is not None and size > changed[1] and now - changed[0] >= rhythm.quiet_after(pace) \
                        and first_output is not None and first_output < changed[0]:
                    revived = now  # back after a silence: one line is not growth again until it shows its pace
                if changed is not None and size > changed[1]:  # each growth seen counts as one line of its pace
                    pace["progress_lines"] = int(pace.get("progress_lines") or 0) + 1
                    pace.setdefault("first_output_t", time.time())
                    pace["last_output_t"] = time.time()
                    loop.read(out)
                changed = (now, size)
            node = (f.raw.get("BatchHost") or "").strip()
            quiet = quiet_for(out, changed[0])
            last_line = quiet if size > 0 else None
            if line.enabled:  # the loop's best shape is worked out only for a line someone reads
                line.say(_waiting_for(first_output, now, loop.heartbeat(pace), settle_s, node), last_line)
            if sampler is not None and node and node != "(null)" and quiet >= rhythm.sample_after(pace) and \
                    (last_sample is None or now - last_sample >= SAMPLE_EVERY_S):
                line.say(f"silent for {seconds(quiet)}: looking at its stacks on {node}", last_line, force=True)
                node_look = sampler(job_id, node, quiet)
                last_sample = time.monotonic()
                on_event("stacks-sampled", {"node": node, "took_s": round(node_look.took_s, 2),
                                            "processes": len(node_look.samples), "quiet_s": round(quiet, 1),
                                            "finding": node_look.finding.cause if node_look.finding else None,
                                            "error": node_look.error})
                if node_look.finding is not None and _size(out) != size:
                    node_look.finding = None  # it wrote while we looked: the wait we saw follows output
                if node_look.finding is not None and node_look.finding.cause != causes.COMPILE_WORKERS_WAIT:
                    # (a compile ends by itself or shows its lock cycle: that wait is the verdict only at the end)
                    seen = look(job_id, paths)
                    seen.node_look, seen.quiet_s, seen.watched_s = node_look, quiet, time.monotonic() - start
                    return seen
            if grow_from is None or grow_from[1] < 0:  # the window starts once the file exists
                grow_from = (now, size)
            elif now - grow_from[0] >= GROW_S:  # a window long enough that a job about to die is seen dying
                hb = loop.heartbeat(pace)
                looping = settle.in_its_loop(hb, settle_s) if size > grow_from[1] else None
                talking = now - first_output if first_output is not None else 0.0
                ripe = (talking >= settle_s or looping is not None) and settle.about_to_end(hb, settle_s) is None \
                    and (revived is None or grow_from[0] >= revived)  # it grew again in a window after that line
                if size > grow_from[1] and (ripe or now >= end):
                    seen = look(job_id, paths)
                    seen.growing, seen.watched_s = True, now - grow_from[0]
                    seen.notes = seen.notes + ([f"ran {_ran_s(f):.0f} s; {looping}"] if looping else [])
                    return seen
                if now >= end:
                    seen = look(job_id, paths)
                    seen.growing, seen.watched_s = False, now - grow_from[0]
                    seen.node_look, seen.quiet_s = node_look, quiet
                    return seen
                grow_from = (now, size)
        if time.monotonic() >= end:
            seen = look(job_id, paths)
            seen.watched_s = time.monotonic() - start
            seen.node_look = node_look
            return seen
        time.sleep(POLL_S)
