"""What Slurm knows about one job: scontrol (live, and for MinJobAge after the end) and sacct (steps, MaxRSS,
long after), merged into one JobFacts. sacct is read as `-P` text: 22.05's `--json` reports exit code 1 as
success."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor.slurm import commands

SACCT_FIELDS = ("JobID,JobName,State,ExitCode,DerivedExitCode,MaxRSS,ReqMem,Elapsed,Timelimit,NodeList,Reason,Start,End,"
                "User,TotalCPU,AllocCPUS,ElapsedRaw")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}


# The step dfdoctor itself adds to a running job to look at its processes (onnode.py: srun --overlap -J ...).
# It is not the user's: a look cut short by the job's own end (CANCELLED 0:15) must not read as a failed step.
OWN_STEP = "dfdoctor-stacks"


@dataclass
class Step:
    """One sacct row below the job: `.batch`, `.extern`, `.0`, ..."""

    id: str
    name: str
    state: str
    exit_code: str
    max_rss: str = ""

    @property
    def failed(self) -> bool:
        return self.state.split()[0] not in ("COMPLETED", "RUNNING", "PENDING") or _nonzero(self.exit_code)


@dataclass
class Task:
    """One task of an array job (or, while they pend, a range of them: `4-9%2` counts 6)."""

    task: str  # the array index, or a still-pending range
    job: str  # how Slurm's tools name it: `40_2`
    state: str
    exit_code: str = ""
    reason: str = ""
    count: int = 1

    @property
    def failed(self) -> bool:
        return self.state in TERMINAL and self.state != "COMPLETED"


def range_count(spec: str) -> int:
    """How many indices an array range names: `0-3` 4, `4-9%2` 6, `1,3,5` 3, `[0-3]` 4 (1 when unreadable)."""
    total = 0
    for part in spec.strip("[]").split("%")[0].split(","):
        a, _, b = part.partition("-")
        b = b.split(":")[0]
        if a.isdigit() and b.isdigit():
            step = part.split(":")[1] if ":" in part and part.split(":")[1].isdigit() else "1"
            total += (int(b) - int(a)) // int(step) + 1
        elif a.isdigit():
            total += 1
    return total or 1


@dataclass
class JobFacts:
    """One job as Slurm describes it; '' where Slurm did not say."""

    job_id: str
    state: str = ""  # PENDING, RUNNING, COMPLETED, FAILED, ... (the word only)
    state_detail: str = ""  # sacct's "CANCELLED by 0"
    reason: str = ""
    exit_code: str = ""  # scontrol's form `exit:signal` (137:0 for a child killed by SIGKILL)
    derived: str = ""
    name: str = ""
    user: str = ""
    partition: str = ""
    nodes: str = ""
    stdout: str = ""
    stderr: str = ""
    workdir: str = ""
    command: str = ""
    req_mem: str = ""
    max_rss: str = ""
    run_time: str = ""
    time_limit: str = ""
    restarts: int = 0
    end_time: str = ""
    dependency: str = ""
    total_cpu: str = ""  # sacct's TotalCPU: CPU time the job's processes used
    alloc_cpus: int = 0
    elapsed_s: int = 0
    steps: list[Step] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)  # an array job's tasks (empty for a plain job)
    source: list[str] = field(default_factory=list)  # which tools answered
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL

    @property
    def known(self) -> bool:
        return bool(self.state)

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("raw", "steps")}
        d["steps"] = [s.__dict__ for s in self.steps]
        d["tasks"] = [t.__dict__ for t in self.tasks]
        if self.tasks:
            d["task_counts"] = self.task_counts()
        return d

    def task_counts(self) -> dict[str, int]:
        """An array's tasks by state: {'COMPLETED': 3, 'FAILED': 1, ...}."""
        out: dict[str, int] = {}
        for t in self.tasks:
            out[t.state] = out.get(t.state, 0) + t.count
        return out

    @property
    def failed_tasks(self) -> list[Task]:
        """The array's failed tasks, lowest index first."""
        return sorted((t for t in self.tasks if t.failed), key=lambda t: int(t.task) if t.task.isdigit() else 0)


def _nonzero(code: str) -> bool:
    return bool(code) and code not in ("0:0", "")


def split_exit(code: str) -> tuple[int, int]:
    """`exit:signal` as two ints ((0, 0) when unreadable)."""
    m = re.match(r"^(\d+):(\d+)$", code or "")
    return (int(m[1]), int(m[2])) if m else (0, 0)


def from_scontrol(job_id: str) -> Optional[dict[str, str]]:
    """`scontrol -d -o show job ID` as a dict (DerivedExitCode needs -d); None when Slurm no longer knows it."""
    recs = scontrol_records(job_id)
    return recs[0] if recs else None


def scontrol_records(job_id: str) -> list[dict[str, str]]:
    """Every record `scontrol -d -o show job ID` prints: one for a plain job, one per task for an array."""
    a = commands.run(["scontrol", "-d", "-o", "show", "job", job_id])
    if not a.ok or not a.out.strip():
        return []
    return commands.records(a.out)


def from_sacct(job_id: str) -> list[dict[str, str]]:
    """sacct's rows for the job and its steps (empty when accounting is off or has not caught up)."""
    a = commands.run(["sacct", "-j", job_id, "-P", f"--format={SACCT_FIELDS}"])
    return commands.table(a.out) if a.ok else []


def facts(job_id: str, *, with_sacct: bool = True) -> JobFacts:
    """Everything Slurm says about the job now: scontrol first (it has StdOut/StdErr), sacct for steps."""
    f = JobFacts(job_id=job_id)
    recs = scontrol_records(job_id)
    sc = recs[0] if recs else None
    if sc:
        f.source.append("scontrol")
        f.raw = sc
        f.state = sc.get("JobState", "")
        f.reason = sc.get("Reason", "")
        f.exit_code = sc.get("ExitCode", "")
        f.derived = sc.get("DerivedExitCode", "")
        f.name, f.partition, f.nodes = sc.get("JobName", ""), sc.get("Partition", ""), sc.get("NodeList", "")
        f.user = sc.get("UserId", "").split("(")[0]
        f.stdout, f.stderr, f.workdir = sc.get("StdOut", ""), sc.get("StdErr", ""), sc.get("WorkDir", "")
        f.command = sc.get("Command", "")
        f.req_mem = _tres(sc.get("ReqTRES", ""), "mem") or sc.get("MinMemoryNode", "") or sc.get("MinMemoryCPU", "")
        f.run_time, f.time_limit = sc.get("RunTime", ""), sc.get("TimeLimit", "")
        f.end_time = sc.get("EndTime", "")
        f.dependency = sc.get("Dependency", "")
        try:
            f.restarts = int(sc.get("Restarts", "0"))
        except ValueError:
            pass
        if sc.get("ArrayJobId") == job_id and "ArrayTaskId" in sc:
            f.tasks = [_scontrol_task(job_id, r) for r in recs]
    if with_sacct:
        _merge_sacct(f, from_sacct(job_id))
    elif f.tasks:
        _array_state(f)
    return f


def _scontrol_task(job_id: str, r: dict[str, str]) -> Task:
    idx = r.get("ArrayTaskId", "")
    return Task(idx, f"{job_id}_{idx}", r.get("JobState", ""), r.get("ExitCode", ""), r.get("Reason", ""),
                range_count(idx))


def _array_state(f: JobFacts) -> None:
    """An array's state as one word: PENDING or RUNNING while any task is, else FAILED when one failed."""
    states = {t.state for t in f.tasks}
    if "RUNNING" in states or "COMPLETING" in states or ("PENDING" in states and states - {"PENDING"}):
        f.state = "RUNNING"
    elif "PENDING" in states:
        f.state = "PENDING"
    elif f.failed_tasks:
        f.state, f.exit_code = "FAILED", f.failed_tasks[0].exit_code
    else:
        f.state, f.exit_code = "COMPLETED", "0:0"


def _merge_sacct(f: JobFacts, rows: list[dict[str, str]]) -> None:
    main = next((r for r in rows if r.get("JobID") == f.job_id), None)
    if main is None and not f.tasks:  # an array job: sacct has a row per task (`40_2`, `40_[4-9]`), none for 40
        tasks = [r for r in rows if re.match(rf"^{re.escape(f.job_id)}_(\d+|\[.*\])$", r.get("JobID", ""))]
        for r in tasks:
            idx = r["JobID"].split("_", 1)[1]
            f.tasks.append(Task(idx.strip("[]"), r["JobID"], (r.get("State") or "").split()[0],
                                r.get("ExitCode", ""), r.get("Reason", ""), range_count(idx)))
        if tasks:
            f.source.append("sacct")
            f.name, f.user = tasks[0].get("JobName", ""), tasks[0].get("User", "")
    if main is None:
        if f.tasks:
            _array_state(f)
        return
    f.source.append("sacct")
    f.total_cpu = main.get("TotalCPU", "")
    f.alloc_cpus = int(main["AllocCPUS"]) if (main.get("AllocCPUS") or "").isdigit() else 0
    f.elapsed_s = int(main["ElapsedRaw"]) if (main.get("ElapsedRaw") or "").isdigit() else 0
    state = main.get("State", "")
    f.state_detail = state
    if not f.state:  # scontrol forgot the job (older than MinJobAge): sacct's words
        f.state = state.split()[0] if state else ""
        f.exit_code = _sacct_exit(main.get("ExitCode", ""))
        f.derived = main.get("DerivedExitCode", "")
        f.reason = main.get("Reason", "")
        f.name, f.user, f.nodes = main.get("JobName", ""), main.get("User", ""), main.get("NodeList", "")
        f.req_mem, f.run_time, f.time_limit = main.get("ReqMem", ""), main.get("Elapsed", ""), main.get("Timelimit", "")
        f.end_time = main.get("End", "")
    ours = [r for r in rows if r is not main and r.get("JobName") == OWN_STEP]
    for r in rows:
        if r is main or r in ours:
            continue
        f.steps.append(Step(r.get("JobID", ""), r.get("JobName", ""), r.get("State", ""), r.get("ExitCode", ""),
                            r.get("MaxRSS", "")))
    if ours and f.derived not in ("", "0:0") and not any(
            _nonzero(st.exit_code) for st in f.steps if not st.id.endswith((".batch", ".extern"))):
        f.derived = "0:0"  # only dfdoctor's own look had a non-zero code (cancelled as the job ended)
    rss = [_kib(s.max_rss) for s in f.steps if s.max_rss]
    if rss and max(rss) > 0:
        f.max_rss = f"{max(rss)}K"


def _sacct_exit(code: str) -> str:
    """sacct's ExitCode as-is (it already subtracts 128 from a child's death by signal: 9:0 for SIGKILL)."""
    return code


def _tres(tres: str, key: str) -> str:
    for part in tres.split(","):
        k, _, v = part.partition("=")
        if k == key:
            return v
    return ""


def _kib(size: str) -> int:
    """`7180K`, `512M`, `1.5G` -> KiB."""
    m = re.match(r"^([\d.]+)([KMGTP]?)", size or "")
    if not m:
        return 0
    return int(float(m[1]) * 1024 ** "KMGTP".index(m[2] or "K"))


def mib(size: str) -> Optional[float]:
    """A Slurm memory size (`100M`, `528576K`, `2G`; a bare number is MiB) in MiB."""
    m = re.match(r"^([\d.]+)([KMGTP]?)", size or "")
    if not m:
        return None
    return float(m[1]) * 1024 ** ("KMGTP".index(m[2] or "M") - 1)


def settle(job_id: str, deadline_s: float = 2.0) -> JobFacts:
    """Facts of a job that has just ended, once sacct has its steps (accounting lags a moment behind)."""
    end = time.monotonic() + deadline_s
    while True:
        f = facts(job_id)
        sacct_ended = (f.state_detail.split() or [""])[0] in TERMINAL
        caught_up = ("sacct" in f.source and sacct_ended and (f.steps or f.state in ("CANCELLED",))) \
            or bool(f.tasks)  # an array: each task is settled on its own when it is read
        if caught_up or time.monotonic() >= end:
            return f
        time.sleep(0.2)
