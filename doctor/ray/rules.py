"""From what Ray's APIs said of a job to a verdict. Each rule looks at one kind of evidence and says nothing (None)
or gives the verdict; the first that speaks wins, so what hides a cause comes first (a task that can never be
placed while the job says RUNNING, an environment that failed while the job still says PENDING)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.lazy_re import compile_later

MISSING = compile_later(r"ModuleNotFoundError: No module named '([^']+)'")
# Python's report of an exception at the very end of a driver's output: its traceback, the exception's line last
ENDING_TRACEBACK = compile_later(r"Traceback \(most recent call last\):\n(?:[ \t].*\n)+\w[\w.]*(?:Error|Exception|Exit)"
                                 r"\b[^\n]*\s*$")
# how a task or actor the memory monitor killed reads in the state API (error_type OUT_OF_MEMORY, and its message
# "N worker(s) were killed due to the node running low on memory" in 2.60; older Rays' words too)
OOM_WORDS = ("OUT_OF_MEMORY", "running low on memory", "OutOfMemoryError", "memory monitor", "due to memory pressure")
# what the driver raises when a task it waits on was killed so (ray.get), in the job's message and log: Ray's
# own exception, never a CUDA OutOfMemoryError
RAY_OOM_RAISED = ("ray.exceptions.OutOfMemoryError", "killed due to the node running low on memory")
OOM_VICTIM = compile_later(r"Selected to kill: \((?:Task|Actor\([^)]*\)): job ID=[^,]*, lease ID=[^,]*, "
                           r"task name=([^,]+),")
# the job manager's own actor that runs each job's driver: the monitor takes it where no task of the job is running
# yet (or none is newer) when the node's memory passes the threshold, e.g. when something outside Ray fills it
SUPERVISOR = "_ray_internal_job_actor_"
# the memory monitor's own numbers in that message: the node's use against its limit, and the worker it chose
OOM_NODE = compile_later(r"Memory on the node \(IP: [^)]*\) was ([^\n(]+)(?:\(([\d.]+)\))?")
OOM_THRESHOLD = compile_later(r"exceeded threshold of \d+B \(([\d.]+% of \d+B limit)\)")
WAITING = ("PENDING_NODE_ASSIGNMENT", "PENDING_ARGS_AVAIL", "PENDING_CREATION", "DEPENDENCIES_UNREADY",
           "PENDING_ACTOR_TASK_ARGS_FETCH", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY")
# Ray's INFO line when `ray.init()` starts an instance of its own instead of joining one (worker.py)
LOCAL_START = compile_later(r"^.*\bStarted a local Ray instance\b.*$", re.M)
NO_CAPACITY_S = 5.0  # how long a feasible request must wait before it is called waiting for capacity


@dataclass
class Seen:
    """A Ray job as watched over HTTP: the job API's answer, the state API's rows, the log lines read."""

    job_id: str
    address: str
    job: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    actors: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    wants: dict[str, float] = field(default_factory=dict)  # the entrypoint's own request
    env_error: str = ""  # pip's (or the runtime env's) own line from runtime_env_setup-*.log
    env_log: str = ""  # which log it was read from
    logs: str = ""  # the driver's output
    growing: Optional[bool] = None  # the driver's output grew during the watch
    waited_s: float = 0.0  # how long the oldest feasible pending request has waited
    demand: list[dict[str, float]] = field(default_factory=list)  # what waits for resources (/api/cluster_status)
    usage: dict[str, list[float]] = field(default_factory=dict)  # resource -> [used, total], the whole cluster
    holders: list[dict[str, Any]] = field(default_factory=list)  # the cluster's live actors (who holds what)
    unreachable: str = ""  # the address did not answer (or refused us)

    @property
    def status(self) -> str:
        return str(self.job.get("status") or "")

    def evidence(self) -> list[str]:
        j = self.job
        ev = [f"Ray job {self.job_id} at {self.address}: {self.status or 'not known'}"
              + (f", error_type {j['error_type']}" if j.get("error_type") else "")
              + (f", driver exit code {j['driver_exit_code']}" if j.get("driver_exit_code") is not None else "")]
        totals = [_fmt(n.get("resources_total") or {}) for n in self.nodes if n.get("state") == "ALIVE"]
        if totals:
            ev.append("nodes' resources_total: " + "; ".join(totals))
        return ev


def _fmt(res: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in sorted(res.items())
                     if not k.startswith(("node:", "memory", "object_store_memory", "accelerator_type")))


def _misses(want: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, float]:
    """What `want` asks that no single live node has in total (empty: some node could hold it)."""
    alive = [n.get("resources_total") or {} for n in nodes if n.get("state") == "ALIVE"]
    if not alive or not want:
        return {}
    best: Optional[dict[str, float]] = None
    for total in alive:
        short = {k: float(v) for k, v in want.items() if float(v or 0) > float(total.get(k, 0) or 0)}
        if not short:
            return {}
        best = short if best is None or len(short) < len(best) else best
    return best or {}


def _pending(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks or actors that wait to be placed."""
    return [r for r in rows if str(r.get("state")) in WAITING]


def _who(row: dict[str, Any]) -> str:
    return row.get("class_name") or row.get("func_or_class_name") or row.get("name") or "?"


def runtime_env_failed(s: Seen) -> Optional[Verdict]:
    if not s.env_error and s.job.get("error_type") != "RUNTIME_ENV_SETUP_FAILURE":
        return None
    message = (s.job.get("message") or "").strip().splitlines()
    said = s.env_error or (message[-1] if message else "?")
    return Verdict("failed", causes.RAY_RUNTIME_ENV_FAILED,
                   f"Ray could not set up the job's runtime environment: {said}",
                   "Fix the runtime_env (its pip list or requirements file: the line above is pip's own) and "
                   "submit again; `pip install` the same list in a fresh venv shows the same error in seconds.",
                   s.evidence() + ([f"{s.env_log}: {s.env_error}"] if s.env_error else []))


def wrong_cluster(s: Seen) -> Optional[Verdict]:
    """The job's driver started a private local Ray instance: Ray says so in the driver's log, and the job API
    shows no driver of the job connected to the cluster. Its tasks run beside the head on none of the cluster's
    resources, and the working_dir it was given lives in the cluster's store, not the private one's (the
    private instance then fails to "download" it, and Ray's message blames an expired package)."""
    started = LOCAL_START.search(s.logs)
    if started is None or s.job.get("job_id") or s.status not in ("RUNNING", "SUCCEEDED", "FAILED", "STOPPED"):
        return None
    return Verdict("failed", causes.RAY_WRONG_CLUSTER,
                   f"The job's driver did not join the Ray cluster at {s.address}: its `ray.init()` started a "
                   "private local Ray instance beside it, so nothing of the job runs on the cluster's nodes.",
                   "Call `ray.init()` with no address (in a job Ray sets RAY_ADDRESS to the cluster) or "
                   "`ray.init(address=\"auto\")`; drop `address=\"local\"` and any other address; not tried."
                   + (f" `dfdoctor stop ray:{s.job_id}` ends this one." if s.status == "RUNNING" else ""),
                   s.evidence() + [f"the driver's log: {started[0].strip()[:300]}",
                                   f"Ray job {s.job_id}: no driver connected to the cluster (the job API's job_id "
                                   "is empty)"])


def infeasible(s: Seen) -> Optional[Verdict]:
    """A request no node has: the entrypoint's own, a task's, an actor's, or a placement group's."""
    if s.status == "PENDING":
        short = _misses(s.wants, s.nodes)
        if short:
            return _infeasible(s, "the job's entrypoint", short, "--entrypoint-num-cpus/--entrypoint-num-gpus")
    if s.status not in ("RUNNING", "PENDING"):
        return None
    for row in _pending(s.tasks) + _pending(s.actors):
        short = _misses(row.get("required_resources") or {}, s.nodes)
        if short:
            kind = "actor" if "class_name" in row and "func_or_class_name" not in row else "task"
            return _infeasible(s, f"{kind} {_who(row)}", short, f"{_who(row)}'s num_cpus/num_gpus/resources")
    for g in s.groups:
        if ((g.get("stats") or {}).get("scheduling_state") or g.get("state")) == "INFEASIBLE":
            bundles = [b.get("unit_resources") or {} for b in g.get("bundles") or []]
            return _infeasible(s, f"placement group {g.get('name') or g.get('placement_group_id')}",
                               {k: v for b in bundles for k, v in b.items()}, "the placement group's bundles")
    return None


def _infeasible(s: Seen, who: str, short: dict[str, float], what: str) -> Verdict:
    wants = ", ".join(f"{k}={v:g}" for k, v in short.items())
    return Verdict("failed", causes.RAY_INFEASIBLE_RESOURCES,
                   f"{who} asks for {wants}, which no node of the cluster has: Ray will never place it and "
                   f"the job stays {s.status} without end.",
                   f"Ask for what a node has ({what}), or add a node that has {wants} to the cluster; "
                   f"`dfdoctor stop ray:{s.job_id}` ends the job.",
                   s.evidence())


def actor_oom(s: Seen) -> Optional[Verdict]:
    """A task or actor the memory monitor killed: its row in the state API, or (the state API's task events come
    a second or so after the job's FAILED) the driver's own error, Ray's OutOfMemoryError, in the job's message."""
    for row in s.actors + s.tasks:
        text = " ".join(str(row.get(k) or "") for k in ("death_cause", "error_message", "error_type"))
        if any(w in text for w in OOM_WORDS):
            return _oom(s, _who(row), text)
    said = (s.job.get("message") or "") + "\n" + s.logs
    if s.status == "FAILED" and any(w in said for w in RAY_OOM_RAISED):
        return _oom(s, _victim(said), said)
    return None


def _victim(said: str) -> str:
    """Whom the monitor chose, by the name its message gives: the job's own task or actor first; else Ray's
    supervisor of the job (then nothing of the user's code held the memory it freed)."""
    names = OOM_VICTIM.findall(said)
    own = [n for n in names if not n.startswith("_ray_internal")]
    if own:
        return own[0]
    if any(n.startswith(SUPERVISOR) for n in names):
        return f"the job's supervisor ({names[0]}, Ray's own actor that runs the driver)"
    return "a worker of the job"


def _oom(s: Seen, who: str, text: str) -> Verdict:
    return Verdict("failed", causes.RAY_ACTOR_OOM, f"Ray's memory monitor killed {who}{_oom_numbers(text, who)}",
                   "Give it less to hold at once or ask for memory (`memory=` in its options) so Ray places it "
                   "where it fits; RAY_memory_usage_threshold moves the kill point; not tried.",
                   s.evidence() + [l.strip()[:400] for l in text.splitlines()
                                   if "Selected to kill" in l or "OOM kill reason" in l][:4])


def _oom_numbers(text: str, who: str) -> str:
    """What the monitor says of the kill: the worker's own memory, the node's use against its limit."""
    name = who.split(" (", 1)[-1].split(",", 1)[0] if who.startswith("the job's supervisor") else who
    chosen = next((l for l in text.splitlines() if "Selected to kill" in l and f"name={name}," in l), "")
    own = re.search(r"actual memory used=([\d.]+\s*[KMGT]?B)", chosen)
    node, threshold = OOM_NODE.search(text), OOM_THRESHOLD.search(text)
    said = [f"it held {own[1]}" if own else "",
            f"the node was at {node[1].strip()}" if node else "",
            f"over the monitor's threshold of {threshold[1]}" if threshold else ""]
    said = [x for x in said if x]
    if said:
        return ": " + ", ".join(said) + "."
    line = next((l.strip() for l in text.splitlines() if "memory" in l.lower()), text.strip())
    return f": {line[:400]}"


def ending_traceback(text: str) -> Optional[str]:
    """The traceback a driver's output ends in (nothing after it: the exception ended the driver), else None."""
    m = ENDING_TRACEBACK.search(text[-20000:])
    return m[0] if m else None


def missing_module(s: Seen) -> Optional[Verdict]:
    """A module the driver (or a task it waits on) cannot import: in Ray's FAILED message or the driver's log,
    or, while Ray still says RUNNING, in the traceback its driver's output ends in: Ray's first word on it, which
    its FAILED follows once its supervisor sees the driver's exit (0.4-0.7 s later here: issue 45)."""
    if s.status == "FAILED":
        m = MISSING.search(s.job.get("message") or "") or MISSING.search(s.logs)
    elif s.status == "RUNNING":
        m = MISSING.search(ending_traceback(s.logs) or "")
    else:
        return None
    if not m:
        return None
    early = [] if s.status == "FAILED" else [
        "the driver's output ends in Python's traceback of it; Ray still said RUNNING (it says FAILED once its "
        "supervisor sees the driver exit)"]
    return Verdict("failed", causes.MISSING_MODULE,
                   f"The job's driver {'died' if s.status == 'FAILED' else 'failed'}: No module named '{m[1]}' on "
                   "the cluster.",
                   _missing_module_fix(m[1].split('.')[0]),
                   s.evidence() + [m[0]] + early)


def _missing_module_fix(top: str) -> str:
    """Where the module goes, said as a question first: whether `top` is a typo of a module installed on the
    cluster was not asked there, and on the package index that name may be an unrelated project (issue 43)."""
    return (f"Check the import first: whether `{top}` is a typo of a module installed on the cluster was not "
            f"established, and on the package index that name may be an unrelated project. If `{top}` is the "
            f"package the code means, declare it in the project's requirements and add it to the job's runtime env "
            f"(`--runtime-env-json '{{\"pip\": [\"{top}\"]}}'`) or install it on every node; not tried.")


def actor_died(s: Seen) -> Optional[Verdict]:
    """The driver exited 0 while its tasks or actors failed: Ray calls the job SUCCEEDED."""
    if s.status != "SUCCEEDED":
        return None
    failed = [r for r in s.tasks if r.get("state") == "FAILED" and r.get("error_type") != "TASK_CANCELLED"]
    dead = [a for a in s.actors if a.get("state") == "DEAD" and a.get("death_cause")
            and "ray.kill" not in str(a.get("death_cause")) and "out of scope" not in str(a.get("death_cause"))]
    if not failed and not dead:
        return None
    first = (failed + dead)[0]
    said = str(first.get("error_message") or first.get("death_cause") or "").strip().splitlines()
    return Verdict("failed", causes.RAY_ACTOR_DIED,
                   f"Ray says the job SUCCEEDED (its driver exited 0), but {len(failed)} task(s) and {len(dead)} "
                   f"actor(s) of it failed; first {_who(first)}: {(said[-1] if said else '?')[:300]}",
                   "The driver never asked for their results: `ray.get(refs)` (not only `ray.wait`) raises the "
                   "first failure and fails the job.",
                   s.evidence())


def failed(s: Seen) -> Optional[Verdict]:
    if s.status != "FAILED":
        return None
    msg = (s.job.get("message") or "").strip().splitlines()
    return Verdict("failed", causes.CRASHED, f"Ray job {s.job_id} FAILED: {(msg[-1] if msg else '?')[:300]}",
                   f"`ray job logs {s.job_id} --address {s.address}` shows its whole output.", s.evidence())


def _short_now(s: Seen) -> Optional[dict[str, float]]:
    """A demand Ray reports that some node could hold but the cluster has not free now; None when none."""
    for want in s.demand:
        if _misses(want, s.nodes):
            continue  # infeasible: the rule above speaks of it
        free = {k: s.usage[k][1] - s.usage[k][0] for k in want if k in s.usage}
        if any(float(v) > free.get(k, 0.0) for k, v in want.items()):
            return want
    return None


def pending_no_capacity(s: Seen) -> Optional[Verdict]:
    """A request some node could hold waits, because the cluster's resources are taken (by whom: its live
    actors, from the state API), as Slurm's Reason=Resources says."""
    if s.waited_s < NO_CAPACITY_S or s.status not in ("PENDING", "RUNNING"):
        return None
    want = _short_now(s)
    if want is None:
        return None
    holders = [a for a in s.holders if a.get("state") == "ALIVE" and a.get("required_resources")]
    held = "; ".join(f"{_who(a)} of job {a.get('job_id', '?')} ({_fmt(a['required_resources'])})"
                     for a in holders[:4]) or "no actor (tasks or other jobs' entrypoints)"
    used = ", ".join(f"{k} {v[0]:g}/{v[1]:g}" for k, v in sorted(s.usage.items()) if k in want)
    return Verdict("pending", causes.RAY_PENDING_NO_CAPACITY,
                   f"The job waits {s.waited_s:.0f} s for {_fmt(want)}, which a node has but not free now "
                   f"(in use: {used}); held by: {held}.",
                   "It starts once they are freed: end what holds them, ask for less, or add a node. "
                   "Nothing failed.", s.evidence())


def ended_ok(s: Seen) -> Optional[Verdict]:
    if s.status == "SUCCEEDED":
        return Verdict("ok", None, f"Ray job {s.job_id} SUCCEEDED; no task or actor of it failed.", "",
                       s.evidence())
    if s.status == "STOPPED":
        return Verdict("failed", causes.CANCELLED, f"Ray job {s.job_id} was STOPPED (`ray job stop` or "
                       "dfdoctor stop).", "Nothing failed in it; submit it again to run it.", s.evidence())
    return None


def running(s: Seen) -> Optional[Verdict]:
    if s.status != "RUNNING" or not s.growing:
        return None
    return Verdict("running", None, f"Ray job {s.job_id} is RUNNING and its output grows.", "", s.evidence())


RULES: tuple[Callable[[Seen], Optional[Verdict]], ...] = (
    wrong_cluster, runtime_env_failed, infeasible, actor_oom, missing_module, actor_died, failed, ended_ok,
    pending_no_capacity, running)


def judge(s: Seen) -> Optional[Verdict]:
    """The first rule that speaks; None while nothing can be said yet (the watch goes on)."""
    if s.unreachable:
        return Verdict("failed", causes.TARGET_UNREACHABLE, f"The Ray cluster at {s.address} did not answer: "
                       f"{s.unreachable}", "Check the address (`ray job submit --address http://HEAD:8265`) and "
                       "that the head runs.", [])
    return next((v for v in (rule(s) for rule in RULES) if v is not None), None)


def at_the_end(s: Seen) -> Verdict:
    """The watch is over and no rule spoke: say Ray's word, never a pass."""
    v = judge(s)
    if v is not None:
        return v
    state = "pending" if s.status == "PENDING" else "unknown"
    return Verdict(state, None, f"Ray job {s.job_id} is {s.status or 'not known'}; its output did not grow "
                   "during the watch, so it is not called running.",
                   f"`dfdoctor status ray:{s.job_id}` looks again.", s.evidence())
