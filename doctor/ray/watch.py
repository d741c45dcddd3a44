"""Watch a Ray job over HTTP, about once a second, as a source of the one watch loop (`watch/loop.py`): each look
asks the job API, the state API (its tasks, actors, placement groups; the nodes' resources) and, while the job
pends or failed, the runtime env's setup log, then hands the sight to `rules.judge`. The loop's output policy is
not used: what Ray's APIs say ends the watch, or the watch's own time does."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Union

from dfdoctor.progress import WatchLine
from dfdoctor.ray import logs
from dfdoctor.ray.api import Api, ApiError
from dfdoctor.ray.rules import MISSING, WAITING, Seen, at_the_end, ending_traceback, judge
from dfdoctor.watch.loop import Ended, drive
from dfdoctor.watch.policy import Observation, Policy
from dfdoctor.lazy_re import compile_later

POLL_S = 1.0
# Between two looks, the job API alone is asked this often: a job that ends (FAILED on a missing module, a crash)
# is looked at at once, not at the next second. One small GET (the job's row in Ray's store) a time.
QUICK_S = 0.2
FINAL = ("SUCCEEDED", "FAILED", "STOPPED")
# In the first TAIL_FOR_S of its RUNNING, while it is small, the driver's output is read this often between
# looks: where start-up failures show, Ray's first word on one is the driver's traceback in that output (a
# missing module), and a read every QUICK_S found it 0.1 s late in the mean, after a watcher that polls at 0.2 s
# as often as not (issue 45). One GET of the output a time, for seconds.
TAIL_S = 0.05
TAIL_FOR_S = 30.0
# A driver whose output ends in Python's report of an exception is likely exiting; Ray's FAILED comes once its
# supervisor saw the process end (0.4-0.7 s later here: the driver's own exit, then Ray's). Unless the traceback
# names the cause itself (rules.missing_module), the job API is then asked this often, for at most EXIT_WAIT_S:
# the verdict waits for Ray's word, never less, and not a poll more.
EXIT_POLL_S = 0.025
EXIT_WAIT_S = 3.0
QUICK_LOG_MAX = 256 << 10  # the driver's output is read between looks only while it is this small
# Ray's own lines in a driver's log (its logger's, the job manager's, the autoscaler's, which every driver of the
# cluster is sent): they are no progress of the job.
RAY_LINE = compile_later(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(?:INFO|WARNING|ERROR|DEBUG) |Running entrypoint "
                         r"for job |(?:\x1b?\[\d+m)?\(autoscaler )")


def own_lines(text: str) -> int:
    """How many lines of a driver's log are the program's own."""
    return sum(1 for line in text.splitlines() if line.strip() and not RAY_LINE.match(line))


class RaySource:
    """One Ray job, looked at once per poll; `Ended((seen, verdict))` once a rule speaks or the watch is over."""

    stacks_where = ""

    def __init__(self, api: Api, job_id: str, seen: Seen, watch_s: float, settle_s: float,
                 on_event: Callable[[str, str], None], env_logs: logs.SetupLogs) -> None:
        self.api, self.job_id, self.seen = api, job_id, seen
        self.watch_s, self.settle_s, self.on_event = watch_s, settle_s, on_event
        self.env_logs = env_logs
        self.log_size: Optional[int] = None
        self.grew = 0  # how many looks found the driver's output longer than the one before
        self.waiting_since: Optional[float] = None
        self.status = ""
        self.looked_at = time.monotonic()
        self.quick_log: Optional[int] = 0  # the driver's output's size at the last quick read (None: too big)
        self.waited_for = -1  # the output's size when its ending traceback was last waited on
        self.running_since: Optional[float] = None  # when a look first found the job RUNNING (time.monotonic())
        self.asked_at = 0.0  # when the quick read last asked the job API
        self.last_words: Optional[str] = None  # the driver's output, ending in a traceback that names the cause
        self.quick_job: dict[str, Any] = {}  # the job API's row as the quick read last had it

    def pause(self, poll_s: float) -> None:
        """The loop's sleep: the rest of the second the last look began in (a look asks several APIs, and under
        load takes a good part of a second: a fixed sleep after it would look every 1.5 s), cut short when the
        job API says the job ended meanwhile (Ray's own first word on a failed driver is that status), or when the
        driver's output ends in a traceback that names the cause (its first word on a missing module)."""
        end = self.looked_at + poll_s
        while True:
            left = end - time.monotonic()
            if left <= 0.05:
                time.sleep(max(0.0, left))
                return
            time.sleep(min(TAIL_S if self._tailing() else QUICK_S, left))
            if self._ended():
                return

    def _tailing(self) -> bool:
        """Whether the driver's output is read every TAIL_S now: RUNNING for less than TAIL_FOR_S, still small."""
        return self.running_since is not None and time.monotonic() - self.running_since < TAIL_FOR_S and \
            self.quick_log is not None

    def _ended(self) -> bool:
        """The job reached a final status since the last look (a quick look at the job API, every QUICK_S), or
        its driver's output (read while it is small) ends in a traceback: one that names the cause ends the pause
        at once, any other has its end waited for closely."""
        if self.status in FINAL:
            return False
        try:
            if not self._tailing() or time.monotonic() - self.asked_at >= QUICK_S:
                self.asked_at = time.monotonic()
                self.quick_job = self.api.job(self.job_id)
                status = str(self.quick_job.get("status") or "")
                if status in FINAL:
                    return True
                if status != "RUNNING" or self.quick_log is None:
                    return False
                self.running_since = self.running_since or time.monotonic()
            text = self.api.job_logs(self.job_id)
        except ApiError:
            return False
        self.quick_log = len(text) if len(text) < QUICK_LOG_MAX else None
        said = ending_traceback(text)
        if len(text) == self.waited_for or said is None:
            return False
        if MISSING.search(said):
            self.last_words = text  # the next look judges it: rules.missing_module
            return True
        self.waited_for = len(text)  # a printed traceback the program lives on after is waited for once
        deadline = time.monotonic() + EXIT_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(EXIT_POLL_S)
            try:
                if str(self.api.job(self.job_id).get("status") or "") in FINAL:
                    return True
            except ApiError:
                return False
        return False

    def look(self, t: float) -> Seen:
        self.looked_at = time.monotonic()
        s = self.seen
        if self.last_words is not None and self.quick_job.get("status") == "RUNNING":
            # its traceback names the cause, read with Ray saying RUNNING: judged now, on that (rules.missing_module)
            s.job, s.logs = self.quick_job, self.last_words
            self._status(s)
            return s
        try:
            s.job = self.api.job(self.job_id)
        except ApiError as exc:
            if exc.status is None or exc.status in (401, 403):
                s.unreachable = exc.said
                return s
            s.job = {}
        self._status(s)
        try:
            if not s.nodes or int(t) % 10 == 0:
                s.nodes = self.api.listed("nodes")
            driver = s.job.get("job_id")
            by_job = {"filter_keys": "job_id", "filter_predicates": "=", "filter_values": driver} if driver else {}
            s.tasks = self.api.listed("tasks", **by_job) if driver else []
            s.actors = self.api.listed("actors", **by_job) if driver else []
            s.groups = self.api.listed("placement_groups") if driver and s.status == "RUNNING" else []
            self._demand(s)
        except ApiError:
            pass  # the state API may lag the job API: the next look asks again
        if s.status in ("PENDING", "FAILED") or s.job.get("error_type") == "RUNTIME_ENV_SETUP_FAILURE":
            s.env_error, s.env_log = self.env_logs.error(pip_packages(s.job))
        self._output(s)
        self._waiting(s, t)
        return s

    def _status(self, s: Seen) -> None:
        """Note the job's status: its change in the timeline, when it first ran."""
        if s.status != self.status:
            self.on_event("ray", f"status={s.status}")
            self.status = s.status
        if s.status == "RUNNING":
            self.running_since = self.running_since or time.monotonic()

    def _output(self, s: Seen) -> None:
        if s.status not in ("RUNNING", "SUCCEEDED", "FAILED", "STOPPED"):
            return
        try:
            s.logs = self.api.job_logs(self.job_id)
        except ApiError:
            return
        size = own_lines(s.logs)
        if self.log_size is not None and size > self.log_size:
            self.grew += 1
        # progress is the program's own output grown at two looks at least: one line, then an exit, is no loop
        s.growing = self.grew >= 2
        self.log_size = size

    def _demand(self, s: Seen) -> None:
        """What waits for resources, and the cluster's use of them (`ray status`'s numbers); the live actors
        (who holds them) once something waits."""
        report = ((self.api.get("/api/cluster_status").get("data") or {}).get("clusterStatus") or {}).get(
            "loadMetricsReport") or {}
        s.usage = {k: v for k, v in (report.get("usage") or {}).items() if isinstance(v, list) and len(v) == 2}
        s.demand = [d[0] for d in report.get("resourceDemand") or [] if d and isinstance(d[0], dict)]
        s.holders = self.api.listed("actors", filter_keys="state", filter_predicates="=",
                                    filter_values="ALIVE") if s.demand else []

    def _waiting(self, s: Seen, t: float) -> None:
        waits = [r for r in s.tasks + s.actors if str(r.get("state")) in WAITING]
        if waits or s.demand or s.status == "PENDING":
            self.waiting_since = t if self.waiting_since is None else self.waiting_since
            s.waited_s = t - self.waiting_since
        else:
            self.waiting_since, s.waited_s = None, 0.0

    # ---- the loop's Source
    def observe(self, t: float) -> Union[Observation, Ended, str]:
        s = self.look(t)
        v = judge(s)
        if v is not None and (str(v.state) != "running" or t >= min(self.settle_s, self.watch_s)):
            return Ended((s, v))
        if t >= self.watch_s:
            return Ended((s, at_the_end(s)), said="the watch is over")
        return f"Ray says the job is {s.status or 'not known yet'}"

    def settle(self, o: Observation, steady: bool) -> None:  # never asked: observe gives no Observation
        return None

    def waiting_for(self, o: Observation, steady: bool) -> str:
        return ""

    def sample(self, o: Observation) -> Optional[Any]:
        return None

    def running(self, o: Observation, looping: Optional[str]) -> Any:
        return None

    def out_of_time(self, o: Observation) -> Optional[Any]:
        return None


def pip_packages(job: dict[str, Any]) -> list[str]:
    """The runtime env's pip list, as the job API shows it (a list, or {"packages": [...]})."""
    pip = (job.get("runtime_env") or {}).get("pip")
    pip = pip.get("packages") if isinstance(pip, dict) else pip
    return [str(p) for p in pip] if isinstance(pip, list) else []


def watch(api: Api, job_id: str, seen: Seen, watch_s: float, settle_s: float = 0.0,
          on_event: Callable[[str, str], None] = lambda n, d: None,
          env_logs: Optional[logs.SetupLogs] = None) -> tuple[Seen, Any]:
    """Watch until Ray's answers give a verdict or `watch_s` is over: (what was seen, the verdict). `env_logs`:
    the setup logs as they were before the launch (None: a status, which does not read them)."""
    source = RaySource(api, job_id, seen, watch_s, settle_s, on_event, env_logs or logs.SetupLogs(api))
    line = WatchLine()
    try:
        return drive(source, Policy(watch_s, settle_s), line, POLL_S, sleep=source.pause)
    finally:
        line.close()  # before the verdict: nothing of the progress line stays above it
