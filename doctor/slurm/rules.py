"""From what Slurm recorded to a verdict. Each rule looks at one kind of evidence and either says nothing
(None) or gives the verdict; the first that speaks wins, so the specific ones come first (a launch failure
before a signal, an OOM seen only in a step before the step's plain failure)."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dfdoctor import causes
from dfdoctor.diagnose import known_failures, rules_runtime, stuck
from dfdoctor.diagnose.traceback import parse_python_error
from dfdoctor.model import Verdict
from dfdoctor.project import typos
from dfdoctor.slurm import efficiency, pending
from dfdoctor.slurm.job import JobFacts, mib, split_exit
from dfdoctor.lazy_re import compile_later

CHDIR_FAILED = compile_later(r"couldn't chdir to `([^']*)': ([^:]+): going to (\S+) instead")
SIGNALS = {9: "SIGKILL", 11: "SIGSEGV", 6: "SIGABRT", 15: "SIGTERM", 7: "SIGBUS", 4: "SIGILL", 8: "SIGFPE",
           53: "signal 53 (Slurm: the job's I/O could not be set up)", 125: "signal 125 (Slurm: OOM)"}


@dataclass
class Seen:
    """A job as watched: Slurm's facts, its output files, and (while it runs) whether its log grows."""

    job: JobFacts
    stdout_text: str = ""
    stderr_text: str = ""
    stdout_exists: Optional[bool] = None
    stderr_exists: Optional[bool] = None
    growing: Optional[bool] = None
    watched_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    task: Optional["Seen"] = None  # an array job's first failed task, seen as a job of its own
    node_look: Optional[Any] = None  # onnode.NodeLook: the job's processes sampled on its node while it ran
    quiet_s: float = 0.0  # how long its output had not changed (by its mtime) when they were sampled / at the end
    grew: bool = False  # its output file grew at some time during the watch (progress seen)
    near: Optional[Any] = None  # near.Near: what is installed near a module it died without, asked on its node

    @property
    def output(self) -> str:
        """Everything the job wrote (stdout and stderr, once if they are the same file)."""
        if self.job.stderr == self.job.stdout:
            return self.stdout_text
        return self.stdout_text + "\n" + self.stderr_text

    def evidence(self) -> list[str]:
        j = self.job
        ev = [f"job {j.job_id} ({j.name or '?'}): {j.state_detail or j.state}, ExitCode {j.exit_code or '?'}"
              + (f", DerivedExitCode {j.derived}" if j.derived and j.derived != "0:0" else "")
              + (f", Reason {j.reason}" if j.reason and j.reason != "None" else "")]
        if j.nodes and j.nodes != "(null)":
            ev.append(f"nodes: {j.nodes}, partition {j.partition or '?'}")
        if j.stdout:
            ev.append(f"StdOut={j.stdout}" + ("" if self.stdout_exists is not False else " (does not exist)"))
        if j.stderr and j.stderr != j.stdout:
            ev.append(f"StdErr={j.stderr}" + ("" if self.stderr_exists is not False else " (does not exist)"))
        if j.tasks:
            ev.append(f"array tasks: {task_counts(j)}")
        for s in j.steps:
            if s.failed:
                ev.append(f"step {s.id} ({s.name}): {s.state} {s.exit_code}" + (f", MaxRSS {s.max_rss}"
                                                                               if s.max_rss not in ("", "0") else ""))
        return ev + self.notes


Rule = Callable[[Seen], Optional[Verdict]]


def dependency_jobs(dependency: str) -> list[str]:
    """The job ids a --dependency names, as scontrol shows it (`afterok:45(unfulfilled),afterany:46_2(failed)`)."""
    return re.findall(r"(?<=[:,?])(\d+(?:_\d+)?)(?=[(,?:]|$)", dependency or "")


def task_counts(j: JobFacts) -> str:
    """`4 task(s): 3 completed, 1 failed`."""
    counts = j.task_counts()
    return f"{sum(counts.values())} task(s): " + ", ".join(f"{n} {state.lower()}" for state, n in
                                                           sorted(counts.items(), key=lambda kv: -kv[1]))


def array_tasks(s: Seen) -> Optional[Verdict]:
    """An array job: one failed task fails it, named with its own error, output file and fix; every task
    completed is ok; while tasks pend or run, the usual rules speak (with the counts in the evidence)."""
    j = s.job
    if not j.tasks:
        return None
    head = f"Array job {j.job_id}, {task_counts(j)}"
    if s.task is not None:
        t = j.failed_tasks[0]
        v = judge(s.task)
        out = s.task.job.stderr if s.task.job.stderr != s.task.job.stdout else s.task.job.stdout
        return Verdict("failed", v.cause, f"{head}. Task {t.task} ({t.job}) failed first: {v.summary}",
                       (v.fix + " " if v.fix else "") + f"Task {t.task}'s output: {out or '(not known)'}; "
                       f"`sacct -j {j.job_id} --format=JobID,State,ExitCode` lists every task.",
                       [head] + list(v.evidence))
    if j.state == "COMPLETED":
        return Verdict("ok", None, f"{head}: every task completed with exit 0.", "", s.evidence())
    return None


def pending_job(s: Seen) -> Optional[Verdict]:
    """PENDING: the reason in words, and whether it can ever start."""
    j = s.job
    if j.state != "PENDING":
        return None
    meaning, fix, can_start = pending.explain(j.reason)
    deps = dependency_jobs(j.dependency)
    fix = fix.replace("JOBID", j.job_id).replace("PARTITION", j.partition or "PARTITION")
    fix = fix.replace("DEPS", ",".join(deps) if deps else j.job_id)
    if deps and j.reason.startswith("Dependency"):
        meaning += f": job {', '.join(deps)} ({j.dependency})"
    if can_start is False:
        return Verdict("pending", causes.NEVER_STARTS, f"Job {j.job_id} is pending and will never start: "
                       f"{meaning} (Reason {j.reason}).", fix, s.evidence())
    return Verdict("pending", None, f"Job {j.job_id} is pending: {meaning} (Reason {j.reason}).", fix,
                   s.evidence())


def output_not_opened(s: Seen) -> Optional[Verdict]:
    """A launch failure whose StdOut/StdErr folder is missing: Slurm could not open the output file."""
    j = s.job
    e, sig = split_exit(j.exit_code)
    if not (sig == 53 or (j.reason == "JobLaunchFailure" and j.state == "FAILED")):
        return None
    for path, exists in ((j.stdout, s.stdout_exists), (j.stderr, s.stderr_exists)):
        if path and exists is False and not os.path.isdir(os.path.dirname(path) or "/"):
            folder = os.path.dirname(path)
            return Verdict("failed", causes.LOG_DIR_MISSING, f"Slurm could not open the job's output file "
                           f"{path}: its folder {folder} does not exist, so the job never ran and wrote nothing "
                           "(the error is only in slurmd's log on the node).",
                           f"Create the folder before submitting (`mkdir -p {folder}`), or point --output/--error "
                           "at one that exists; sbatch does not create it.", s.evidence())
    return None


def chdir_failed(s: Seen) -> Optional[Verdict]:
    """--chdir to a missing folder: Slurm ran the job in /tmp instead, and relative paths went there."""
    m = CHDIR_FAILED.search(s.output)
    if not m:
        return None
    wanted, why, went = m.groups()
    return Verdict("failed", causes.LOG_ELSEWHERE, f"The job could not enter its working directory {wanted} "
                   f"({why}); Slurm ran it in {went} instead, so whatever it wrote to relative paths (logs, "
                   f"checkpoints) is under {went} on {s.job.nodes or 'the node'}, not where you look.",
                   f"Create {wanted} before submitting, or fix --chdir/-D; look for the lost output in {went} on "
                   "the node.", s.evidence() + [m.group(0)])


def out_of_memory(s: Seen) -> Optional[Verdict]:
    """OUT_OF_MEMORY, in the job or only in one of its steps (under srun the job is FAILED 1:0)."""
    j = s.job
    _, dsig = split_exit(j.derived)
    _, sig = split_exit(j.exit_code)
    steps = [st for st in j.steps if st.state.startswith("OUT_OF_MEMORY")]
    text_oom = "oom-kill event" in s.output or "Out Of Memory" in s.output
    if not (j.state == "OUT_OF_MEMORY" or sig == 125 or dsig == 125 or steps or
            (j.ended and j.state != "COMPLETED" and text_oom) or "Exceeded job memory limit" in s.output):
        return None
    where = f" in step {steps[0].id}" if steps and j.state != "OUT_OF_MEMORY" else ""
    rss = j.max_rss or next((st.max_rss for st in steps if st.max_rss not in ("", "0")), "")
    req = j.req_mem
    used = f"MaxRSS {rss}" if rss else "MaxRSS not recorded (the job was shorter than the accounting interval)"
    ev = s.evidence() + [f"requested memory: {req or '?'}; {used}"]
    ev += [line.strip() for line in s.output.splitlines() if "oom-kill" in line or "Out Of Memory" in line][:3]
    bigger = ""
    if req and mib(req):
        bigger = f" (now {req}; e.g. --mem={int(mib(req) * 2)}M)"
    return Verdict("failed", causes.OOM_KILLED, f"Slurm's memory limit killed the job{where}: it used more than "
                   f"its --mem{(' of ' + req) if req else ''}.",
                   f"Ask for more memory{bigger}, or use less (smaller batch, fewer workers); `sacct -j {j.job_id} "
                   "--format=JobID,MaxRSS,ReqMem` shows what it used.", ev)


def time_limit(s: Seen) -> Optional[Verdict]:
    j = s.job
    if j.state != "TIMEOUT":
        return None
    return Verdict("failed", causes.TIME_LIMIT, f"Slurm ended the job at its time limit ({j.time_limit or '?'}; it "
                   f"ran {j.run_time or '?'}).", "Ask for a longer --time (at most the partition's MaxTime), or "
                   "save checkpoints and resume; Slurm sends SIGTERM first (`--signal=B:USR1@120` gives warning).",
                   s.evidence() + _lines(s.output, "DUE TO TIME LIMIT"))


def node_failure(s: Seen) -> Optional[Verdict]:
    j = s.job
    if j.state != "NODE_FAIL" and not (j.restarts and "NODE FAILURE" in s.output) and j.reason != "NodeDown" \
            or j.state in ("RUNNING", "COMPLETED"):
        return None
    return Verdict("failed", causes.NODE_FAILURE, f"A node of the job ({j.nodes or '?'}) stopped answering "
                   "Slurm, which ended the job" + (f" and requeued it ({j.restarts} restart(s))" if j.restarts
                                                   else "") + ".",
                   "Resubmit (without --no-requeue Slurm does so itself); `sinfo -R` shows why the node is "
                   "down; exclude it with --exclude if it keeps failing.",
                   s.evidence() + _lines(s.output, "NODE FAILURE"))


def preempted(s: Seen) -> Optional[Verdict]:
    j = s.job
    if j.state != "PREEMPTED":
        return None
    return Verdict("failed", causes.PREEMPTED, f"A higher-priority job took the nodes of job {j.job_id}: Slurm "
                   "preempted it.", "Resubmit with --requeue (and checkpoints) so a preempted job resumes, or "
                   "use a partition/QOS that is not preemptible.", s.evidence())


def cancelled(s: Seen) -> Optional[Verdict]:
    j = s.job
    if j.state != "CANCELLED":
        return None
    m = re.search(r"by (\d+)", j.state_detail)
    who = "someone"
    if m:
        who = _user(int(m[1]))
    ran = _seconds(j.run_time)
    when = (f" after it had run {j.run_time}" if ran else " before it started" if ran == 0 and
            s.stdout_exists is not True else "")
    return Verdict("failed", causes.CANCELLED, f"Job {j.job_id} was cancelled by {who}{when}.",
                   "Nothing failed in the job itself; submit it again if the cancel was a mistake "
                   f"(`sacct -j {j.job_id} --format=JobID,State,Start,End` shows who, by uid, and when).",
                   s.evidence() + _lines(s.output, "CANCELLED AT"))


def python_traceback(s: Seen) -> Optional[Verdict]:
    """FAILED with a Python traceback in the job's own StdErr: the existing diagnosis of it."""
    j = s.job
    if j.state not in ("FAILED",) and not (j.derived and j.derived != "0:0"):
        return None
    err = parse_python_error(s.stderr_text if j.stderr != j.stdout else s.output)
    if err is None:
        return None
    ev = [*err.tail] + s.evidence()
    step = "a step of " if j.state == "COMPLETED" else ""
    if err.exc_type in ("SyntaxError", "IndentationError", "TabError"):
        return Verdict("failed", causes.SYNTAX_ERROR, f"{err.where} does not compile: {err.headline}.",
                       f"Fix the syntax at {err.where}; `python -m py_compile FILE` checks it.", ev)
    mod = re.search(r"No module named '([^']+)'", err.message)
    if err.exc_type.endswith(("ModuleNotFoundError", "ImportError")) and mod:
        return _missing_module(s, err, mod[1], ev)
    ctx = rules_runtime.Context(output=s.stderr_text if j.stderr != j.stdout else s.output,
                                argv=_words(j.command), local=False,
                                cwd=j.workdir or None)
    found = rules_runtime.classify(err, ctx) or known_failures.classify(err, ctx)
    if found is not None:  # what the job died of, in the words a launch here would use
        return Verdict("failed", found.cause, f"{step}Job {j.job_id}: {found.summary}", found.fix,
                       [*found.evidence, *ev])
    started = bool(err.before.strip()) or bool(s.stdout_text.strip() and j.stderr != j.stdout)
    cause = causes.CRASHED if started else causes.IMPORT_ERROR
    return Verdict("failed", cause, f"{step}Job {j.job_id} " + ("crashed after it started logging" if started
                   else "died while importing or starting") + f": {err.headline} at {err.where}.",
                   f"Fix the error raised at {err.where}; the full traceback is in {j.stderr or j.stdout}.", ev)


def _missing_module(s: Seen, err: Any, name: str, ev: list[str]) -> Verdict:
    """`No module named 'X'`: said with the local gate's typo rule (doctor/project/typos.py), from what is
    installed near X on the job's node (slurm/near.py, asked before the rules ran: `s.near`). `pip install X`
    only for a name the project declares, or that nothing installed there is close to."""
    j, near = s.job, s.near
    on = j.nodes or "its node"
    typo = typos.module_fix(name, near.answer, near.where, near.declared) if near and near.answer else None
    if typo:
        return Verdict("failed", causes.MISSING_MODULE, f"The job died at start on {on}: No module named "
                       f"{name!r}, imported at {near.where}: {typos.module_question(name, near.answer) or ''}"
                       .rstrip(": "), f"{typo} Asked on {near.node}, in {near.python}.", ev)
    summary = f"The job died at start on {on}: module {name!r} is not installed where it ran (imported at {err.where})."
    install = f"Install {name.split('.')[0]!r} in the job's environment on the compute nodes"
    if near is None or near.declared or near.answer is not None:
        why = (f" ({near.declared} declares it)" if near and near.declared else
               f" (nothing installed on {near.node} has a name close to it)" if near and near.answer else "")
        return Verdict("failed", causes.MISSING_MODULE, summary, f"{install}{why}; not tried.", ev)
    if near.why_not.startswith("a library"):  # a dependency of an installed library: no typo of the job's
        return Verdict("failed", causes.MISSING_MODULE, summary, f"{install} (a library imports it); not tried.", ev)
    return Verdict("failed", causes.MISSING_MODULE, summary,
                   f"Check the import at {near.where}: whether an installed module has a name close to "
                   f"{name.split('.')[0]!r} was not established ({near.why_not}), and the project does not "
                   f"declare it, so dfdoctor does not offer `pip install {name.split('.')[0]}` (on the package "
                   "index that name may be an unrelated project). If it is a typo, fix the name; if it is what the "
                   "code means, declare it in the project's requirements and install it in the job's environment "
                   "on the compute nodes (not tried).", ev)


def _words(command: str) -> list[str]:
    """scontrol's Command as argv (empty when it does not split: an unbalanced quote in a path)."""
    try:
        return shlex.split(command)
    except ValueError:
        return []


def step_failed(s: Seen) -> Optional[Verdict]:
    """COMPLETED 0:0, yet a step failed: the batch script hid it (it exited 0 after srun failed)."""
    j = s.job
    if j.state != "COMPLETED" or j.exit_code not in ("0:0", ""):
        return None
    bad = [st for st in j.steps if st.failed and not st.id.endswith((".batch", ".extern"))]
    if not (bad or (j.derived and j.derived != "0:0")):
        return None
    what = f"step {bad[0].id} {bad[0].state} {bad[0].exit_code}" if bad else f"DerivedExitCode {j.derived}"
    err = parse_python_error(s.stderr_text if j.stderr != j.stdout else s.output)
    said = f" The step's error: {err.headline} at {err.where}." if err else ""
    return Verdict("failed", causes.STEP_FAILED, f"Job {j.job_id} is COMPLETED with exit 0, but a step failed "
                   f"({what}): the batch script went on and exited 0 after it.{said}",
                   "Make the script stop on a failed step (`set -e`, or `srun ... || exit $?`), then fix the "
                   "step; its error is in the output file.", s.evidence() + _lines(s.output, "srun: error"))


def killed_by_signal(s: Seen) -> Optional[Verdict]:
    j = s.job
    code, sig = split_exit(j.exit_code)
    if j.state not in ("FAILED",):
        return None
    if sig:
        num = sig
    elif code > 128 and code - 128 in SIGNALS:
        num = code - 128
    else:
        return None
    name = SIGNALS.get(num, f"signal {num}")
    return Verdict("failed", causes.KILLED_BY_SIGNAL, f"The job's process died from {name}"
                   + (" (a crash in native code)" if num in (11, 7, 4, 8, 6) else "") + ".",
                   "A SIGKILL nobody sent by hand is usually memory (check `dmesg`/MaxRSS) or an admin; a "
                   "SIGSEGV is a native crash (run with `python -X faulthandler`).",
                   s.evidence() + _lines(s.output, "Killed", "Segmentation fault"))


def command_not_found(s: Seen) -> Optional[Verdict]:
    j = s.job
    code, _ = split_exit(j.exit_code)
    line = next((l for l in s.output.splitlines() if "command not found" in l or "No such file or directory"
                 in l and "can't open file" in l), "")
    if j.state != "FAILED" or not (code in (126, 127) or (code == 2 and "can't open file" in line)) or not line:
        return None
    return Verdict("failed", causes.COMMAND_NOT_FOUND, f"A command in the batch script could not be run: "
                   f"{line.strip()}", "Fix the path or load the module/environment that provides it in the "
                   "script (the job's PATH is the one at submission unless --export says otherwise).",
                   s.evidence())


# bash's words for a failed `cd` or `source` of the batch script (Slurm runs it as .../slurm_script)
_SCRIPT_STEP = compile_later(r"line (\d+): (?:cd: )?(\S+): No such file or directory")


def script_step_failed(s: Seen) -> Optional[Verdict]:
    """The batch script stopped at a `cd` into a missing folder or a `source` of a missing venv (set -e): the
    line and what is missing, not a crash to read up on."""
    j = s.job
    if j.state != "FAILED":
        return None
    for line in s.output.splitlines():
        m = _SCRIPT_STEP.search(line) if "slurm_script" in line or j.command and j.command in line else None
        if m is None:
            continue
        number, path = m.group(1), m.group(2)
        name = os.path.basename(j.command.split()[0]) if j.command else "the batch script"
        node = j.nodes or "its node"
        if " cd: " in line:
            return Verdict("failed", causes.INPUT_MISSING, f"{name} line {number}: cd {path}: no such folder on "
                           f"node {node}; the script stopped there, before its training command.",
                           f"Create {path} on the file system the nodes share, or fix line {number} of {name}; "
                           "`dfdoctor check -- sbatch ...` looks for it on a node before submitting.",
                           s.evidence() + [line.strip()])
        if path.endswith("/activate"):
            return Verdict("failed", causes.COMMAND_NOT_FOUND, f"{name} line {number}: source {path}: no such file "
                           f"on node {node} (no virtual environment there); the script stopped there.",
                           f"Create the environment where the job runs, or fix line {number} of {name}; "
                           "`dfdoctor check -- sbatch ...` looks for it on a node before submitting.",
                           s.evidence() + [line.strip()])
    return None


def failed_otherwise(s: Seen) -> Optional[Verdict]:
    j = s.job
    if j.state not in ("FAILED", "BOOT_FAIL", "DEADLINE"):
        return None
    code, _ = split_exit(j.exit_code)
    return Verdict("failed", causes.CRASHED, f"Job {j.job_id} failed with exit status {code}.",
                   f"Read the end of {j.stderr or j.stdout or 'its output file'}.",
                   s.evidence() + s.output.strip().splitlines()[-5:])


def stuck_on_its_node(s: Seen) -> Optional[Verdict]:
    """A running job with quiet output whose processes, sampled on its node, prove a wait (a rank missing, a
    lock, stdin, a timer...) or work while Python holds the output in its buffer."""
    j, look = s.job, s.node_look
    if j.state != "RUNNING" or look is None or look.finding is None:
        return None
    f = look.finding
    said = "is empty" if s.stdout_exists and not s.stdout_text else "has not changed"
    quiet = f"its output file {j.stdout or '(unknown)'} {said} for {s.quiet_s:.0f} s"
    lines = [ln for ln in f.lines if not ln.startswith(stuck.WHOLE_JOB)]
    ev = s.evidence() + [f"{quiet}; its processes on {look.node}, each looked at twice 1 s apart "
                         f"(srun --overlap, {look.took_s:.1f} s):"] + lines
    if f.cause == causes.OUTPUT_BUFFERED:
        return Verdict("unknown", f.cause, f"Job {j.job_id} is running on {look.node} and working, but {quiet}: "
                       "its Python holds its output in a block buffer (stdout is a file, not a terminal).",
                       _unbuffered_fix(look, j.job_id), ev)
    return Verdict(f.state, f.cause, f"Job {j.job_id} on {look.node}, {quiet}: {f.headline}",
                   f"{f.fix} `scancel {j.job_id}` stops the job.", ev)


def _unbuffered_fix(look: Any, job_id: str) -> str:
    """How to get the output of a buffered Python under Slurm, with the command seen on the node."""
    proc = next((p for p in look.samples if p.python and p.buffered and not p.gone), None)
    argv = list(proc.cmdline) if proc else []
    seen_as = shlex.join(argv) if argv else "python3 train.py"
    with_u = shlex.join(argv[:1] + ["-u"] + argv[1:]) if argv else "python3 -u train.py"
    return (f"In the batch script run `{with_u}` instead of `{seen_as}`, or `export PYTHONUNBUFFERED=1` before "
            "it; for a script you cannot edit, `sbatch --export=ALL,PYTHONUNBUFFERED=1 ...` (not tried). What it "
            f"printed so far is written when Python exits normally; `scancel {job_id}` (SIGTERM) ends it without "
            "writing it.")


def running(s: Seen) -> Optional[Verdict]:
    """A job Slurm runs is `running` only on progress seen (the brief's "running is earned"): its output grew
    during the watch, or a look on its node saw its processes move in the job's own code (a stack changed, CPU
    spent), as the local rule accepts. Otherwise `unknown`, with what was and was not observed."""
    j = s.job
    if j.state not in ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"):
        return None
    look = s.node_look
    if look is not None and not s.growing:  # looked at, nothing proven: what each process does
        s.notes = s.notes + ([f"on {look.node}: {look.error}"] if look.error else
                             [f"its processes on {look.node} (no wait proven):"] + look.lines())
    follow = f"`tail -f {shlex.quote(j.stdout)}` follows it" if j.stdout else "`dfdoctor status` looks again"
    if s.growing:
        return Verdict("running", None, f"Job {j.job_id} is running on {j.nodes} and its output file grows.",
                       f"{follow}.", s.evidence())  # ending it: orchestrate adds `dfdoctor stop RUN`
    moved = _moved_on_node(look)
    if moved:
        return Verdict("running", None, f"Job {j.job_id} is {j.state} on {j.nodes} and works without printing: "
                       f"{_quiet_words(s)}, but it makes progress: {moved[0]}.",
                       f"{follow}; `dfdoctor status` looks again; an output that stays empty under Python is "
                       "usually buffering (`python -u` or PYTHONUNBUFFERED=1).", moved + s.evidence())
    if s.grew and not (look is not None and look.samples):  # a look that saw nothing move since says otherwise
        return Verdict("running", None, f"Job {j.job_id} is {j.state} on {j.nodes}; its output file grew during "
                       f"the watch (it has not changed for the last {s.quiet_s:.0f} s).",
                       f"{follow}; `dfdoctor status` looks again.", s.evidence())
    return _progress_unseen(s, follow)


def _moved_on_node(look: Any) -> list[str]:
    """What the look on the node saw move in the job's own processes (empty: nothing, no look, or looks that
    lean towards a wait, an empty loader, without proving it: its passes move the stack but are no progress)."""
    if look is None or not look.samples or getattr(look, "leaning", None):
        return []
    return stuck.progress(stuck.seen(look.samples))


def _quiet_words(s: Seen) -> str:
    """How long the output has been quiet, as the file shows it (its modification time), not the watch's length."""
    j = s.job
    if not j.stdout:
        return "Slurm names no output file for it"
    if s.stdout_exists is False:
        return f"its output file {j.stdout} does not exist yet"
    quiet = max(s.quiet_s, s.watched_s)
    said = "is empty and has not changed" if s.stdout_exists and not s.stdout_text else "has not changed"
    return f"its output file {j.stdout} {said} for {quiet:.0f} s (by its modification time)"


def _look_words(s: Seen) -> str:
    """What the look on the node did and did not observe."""
    look, node = s.node_look, s.job.nodes or "its node"
    if look is None:
        return f"its processes on {node} were not looked at during the watch"
    if not look.samples:
        why = look.error or "no answer"
        if "no process of job" in why:  # the node's agent finds the job's processes by their SLURM_JOB_ID
            why += (" (dfdoctor finds a job's processes by the SLURM_JOB_ID in their environment: one started "
                    "with a cleared environment, `env -i` or a container's --cleanenv, is not found)")
        return f"the look at its processes on {look.node} failed: {why}"
    if getattr(look, "leaning", None):
        return f"the looks at its processes on {look.node} lean towards {look.leaning} without proving it"
    return "nothing moved between two looks at its processes (no stack changed, no CPU spent)"


def _progress_unseen(s: Seen, follow: str) -> Verdict:
    """`unknown`: no fault found, and no progress seen either."""
    j = s.job
    return Verdict("unknown", None, f"Job {j.job_id} is {j.state} on {j.nodes}, but no progress was seen: "
                   f"{_quiet_words(s)}, and {_look_words(s)}: dfdoctor cannot tell whether it goes on.",
                   f"{follow} (output that comes shows it works); `dfdoctor status slurm:{j.job_id}` looks again; "
                   f"`scancel {j.job_id}` stops it." + (" An output that stays empty under Python may be buffering "
                                                        "(`python -u` or PYTHONUNBUFFERED=1; not tried)."
                                                        if s.stdout_exists and not s.stdout_text else ""),
                   s.evidence())


def completed(s: Seen) -> Optional[Verdict]:
    j = s.job
    if j.state != "COMPLETED":
        return None
    used = efficiency.summary(j)
    return Verdict("ok", None, f"Job {j.job_id} completed with exit 0 on {j.nodes}" + (f"; {used}." if used else "."),
                   "", s.evidence())


RULES: list[Rule] = [array_tasks, pending_job, output_not_opened, chdir_failed, out_of_memory, time_limit, preempted,
                     node_failure, cancelled, step_failed, python_traceback, command_not_found, killed_by_signal,
                     script_step_failed, failed_otherwise, stuck_on_its_node, running, completed]


def judge(s: Seen) -> Verdict:
    """The first rule that speaks; a state no rule knows is said as Slurm's word, never as a pass."""
    for rule in RULES:
        v = rule(s)
        if v is not None:
            used = efficiency.summary(s.job) if s.job.ended and v.state != "ok" else None
            if used:
                v.evidence.append(f"what it used of its request: {used}")
            return v
    j = s.job
    if not j.known:
        # no evidence lines: Slurm gave nothing to show (they read `job 99999 (?): , ExitCode ?`)
        return Verdict("unknown", None, f"Slurm does not know job {j.job_id} (neither scontrol nor sacct has it).",
                       "Check the job id; scontrol forgets jobs MinJobAge after they end, and sacct needs "
                       "accounting (slurmdbd).", [])
    return Verdict("unknown", None, f"Job {j.job_id} is {j.state}, a state dfdoctor has no rule for.",
                   f"See `scontrol show job {j.job_id}` and `sacct -j {j.job_id}`.", s.evidence())


def _seconds(run_time: str) -> Optional[int]:
    """Slurm's `[D-]HH:MM:SS` (or MM:SS) in seconds; None when Slurm did not say."""
    m = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$", run_time or "")
    if not m:
        return None
    d, h, mi, sec = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + sec


def _lines(text: str, *marks: str) -> list[str]:
    return [l.strip() for l in text.splitlines() if any(m in l for m in marks)][:3]


def _user(uid: int) -> str:
    try:
        import pwd
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"
