"""A real Ray head for the tests, private in every way: its own ports (free ones, asked of the kernel), its own
--temp-dir, its own HOME (a `ray.init()` writes ~/.ray/auth_token, which turns token auth on for every later head
of that user: RAY-FACTS.md). It is ended by its own processes (each carries a marker in its environment), never by
`ray stop`, which ends every Ray process of the machine.

The head has token auth on (RAY_AUTH_MODE=token), its token in the private HOME's ~/.ray/auth_token, as a user's
head is once a `ray.init()` has written that file: every HTTP call then needs the token, and dfdoctor must find it
where Ray's own tools do."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psutil

MARK = "DFDOCTOR_TEST_RAY_HEAD"
WORKER_PORTS = 100
START_TIMEOUT_S = 120  # 4.5-13 s measured; far more under a loaded CI machine
# Ray's own settings for the test heads only (the `ray start`, hence its raylet and the workers it starts; not the
# environment the tests' drivers and `ray job submit` run in): what no test observes, left out to spare the CPU.
# Ray prestarts a Python worker per CPU for a node's first driver and more for a backlog
# (prestart_worker_first_driver, enable_worker_prestart in Ray's ray_config_def.h); here the first driver is the job
# server's own, and every job brings its runtime_env (working_dir), which a prestarted worker has not, so the
# prestarted ones were never used (raylet.out: started, never given a task) yet each imported ray. Without them a
# worker starts when a task or actor asks for one, as each job's do anyway.
# Ray's runtime env agent tries a failed setup RUNTIME_ENV_RETRY_TIMES times (3 by default), and in a venv each try
# first clones the whole venv (this one's 1.5 GiB: 10-13 CPU-s and as many seconds of disk) before pip runs. The
# pip test's verdict comes on the first try's pip line in the setup log; the second and third tries ran on into
# the next tests, 25-40 s apart under load (round 21: 2 clones and 4 pip runs, 30 CPU-s, inside later tests).
# One try: the job then FAILS after it, and nothing of it outlives its test.
QUIET = {"RAY_prestart_worker_first_driver": "0", "RAY_enable_worker_prestart": "0", "RUNTIME_ENV_RETRY_TIMES": "1"}
# What no test reads, off: Ray's metrics (each Ray process exports them to the dashboard agent, which nothing here
# asks; dfdoctor reads the job, state, log and cluster-status APIs) and the agent's node report every 5 s (psutil of
# every process of the node, for the dashboard's web page and metrics: REPORTER_UPDATE_INTERVAL_MS). The dashboard's
# own metrics too (dashboard/head.py's _record_dashboard_metrics, every METRICS_RECORD_INTERVAL_S, 5 by default:
# psutil's memory_full_info, a read of /proc/PID/smaps, of the dashboard and each of its 9 module processes, for
# its Prometheus gauges, which metrics off leaves unread): half of an idle dashboard's CPU (py-spy), 0.3 CPU-s a
# minute here.
UNREAD = {"RAY_enable_metrics_collection": "0", "REPORTER_UPDATE_INTERVAL_MS": "3600000",
          "METRICS_RECORD_INTERVAL_S": "3600"}
# Ray's log monitor streams the workers' output to their drivers; no test job prints from a task, and dfdoctor
# reads the driver's own output (the job API) and the node's log files (the log API, which the agent serves).
PARTS_OFF = ("--include-log-monitor=false",)
PORT_NAMES = ("--port", "--dashboard-port", "--node-manager-port", "--object-manager-port",
              "--ray-client-server-port", "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
              "--metrics-export-port", "--runtime-env-agent-port")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _worker_ports(taken: set[int]) -> int:
    """The first of WORKER_PORTS ports for the head's workers: none of them one of its other ports (Ray refuses
    to start when they overlap), the first one free now."""
    while True:
        lo = _free_ports(1)[0]
        if lo + WORKER_PORTS < 65536 and not any(lo <= p < lo + WORKER_PORTS for p in taken):
            return lo


@dataclass
class Head:
    """A started head: its job API's address, the HOME and environment its tests submit with."""

    address: str
    home: Path
    temp: Path
    env: dict
    mark: str
    gcs: str = ""  # the GCS address a driver joins (RAY_ADDRESS): 127.0.0.1:PORT

    def processes(self) -> list[psutil.Process]:
        """Its processes: those with its marker in their environment, and those running in its HOME, the folder
        `ray start` ran in. The marker alone misses some: Ray's dashboard agent renames itself, and its environment
        as /proc shows it was then cut or blank (seen with the marker gone: the layout of the environment `ray start`
        got decides); such an agent was left to end by itself, a minute after its head, with 16 CPU-s spent."""
        found = []
        for p in psutil.process_iter(["pid"]):
            try:
                if self._ours(p) and p.status() != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except (psutil.Error, OSError):
                continue
        return found

    def _ours(self, p: psutil.Process) -> bool:
        if p.environ().get(MARK) == self.mark:
            return True
        cwd = p.cwd()  # " (deleted)" appended once end() has removed the folder
        return cwd == str(self.home) or cwd == f"{self.home} (deleted)"

    def end(self) -> None:
        """SIGTERM to every process of this head, then SIGKILL to those still there 10 s later."""
        left = self.processes()
        for p in left:
            try:
                p.send_signal(signal.SIGTERM)
            except psutil.Error:
                pass
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.processes()
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        shutil.rmtree(self.temp, ignore_errors=True)
        shutil.rmtree(self.home, ignore_errors=True)


def _cluster_venv(where: Path, python_bin: Path) -> Path:
    """The venv the head runs in: a venv of its own whose one .pth file adds `python_bin`'s site-packages (Ray and
    all else there, their own .pth files included), with a `ray` command. A job's runtime env with `pip` makes Ray
    clone the venv its agent runs in (RAY-FACTS.md) before pip runs: the test venv, 1.6 GB with torch, took 13.5
    CPU-s to clone (and as many seconds of disk); this one is a few files. Ray, the Python and the packages a job
    sees are the same: the jobs' `python` (the head's PATH) and Ray's workers run from here."""
    subprocess.run([str(python_bin), "-m", "venv", "--without-pip", str(where)], check=True, timeout=60)
    site = subprocess.run([str(python_bin), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (own,) = where.glob("lib/python3*/site-packages")
    (own / "_dfdoctor_test_cluster.pth").write_text(f"import site; site.addsitedir({site!r})\n")
    ray = where / "bin" / "ray"
    ray.write_text(f"#!{where / 'bin' / 'python'}\nimport sys\nfrom ray.scripts.scripts import main\n"
                   "sys.exit(main())\n")
    ray.chmod(0o755)
    return where


def start(python_bin: Path, tries: int = 3, settings: Optional[dict] = None) -> Head:
    """`ray start --head --num-cpus 2` of the venv of `python_bin`, on free ports, its temp dir and HOME its own.
    A port free when chosen may be taken before Ray binds it (other tests run meanwhile): then new ports.
    `settings`: Ray's own RAY_* variables for the head (e.g. its memory monitor's threshold)."""
    for attempt in range(tries):
        try:
            return _start(python_bin, settings or {})
        except PortTaken:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


class PortTaken(RuntimeError):
    """`ray start` failed on a port, or its GCS did not answer in Ray's own time: a new start (new ports) may not."""


def _start(python_bin: Path, settings: dict) -> Head:
    ports = dict(zip(PORT_NAMES, _free_ports(len(PORT_NAMES))))
    lo = _worker_ports(set(ports.values()))
    # a short temp dir: Ray's unix sockets live under it, and a socket path has at most 107 characters
    temp = Path(tempfile.mkdtemp(prefix="dfray", dir="/tmp"))
    home = Path(tempfile.mkdtemp(prefix="dfrayhome", dir="/tmp"))
    mark = uuid.uuid4().hex
    (home / ".ray").mkdir(mode=0o700)
    (home / ".ray" / "auth_token").write_text(uuid.uuid4().hex + uuid.uuid4().hex)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), **{MARK: mark}, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
               PATH=f"{python_bin.parent}{os.pathsep}{env.get('PATH', '')}")
    venv = _cluster_venv(home / "venv", python_bin)
    argv = [str(venv / "bin" / "ray"), "start", "--head", "--num-cpus", "2", "--num-gpus", "0",
            "--disable-usage-stats", f"--temp-dir={temp}", "--include-dashboard=true",
            "--dashboard-host=127.0.0.1", f"--min-worker-port={lo}", f"--max-worker-port={lo + WORKER_PORTS - 1}",
            *PARTS_OFF, *[f"{k}={v}" for k, v in ports.items()]]
    head = Head(f"http://127.0.0.1:{ports['--dashboard-port']}", home, temp, env, mark, f"127.0.0.1:{ports['--port']}")
    try:
        started = {**env, **QUIET, **UNREAD, **settings, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}
        p = subprocess.run(argv, env=started, cwd=home, capture_output=True, text=True,
                           timeout=START_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            said = f"ray start failed ({p.returncode}): {p.stderr[-2000:]}"
            taken = any(w in p.stderr for w in ("port number", "already in use", "Address in use"))
            # Ray's own deadline for its GCS to answer `ray start` (node.py: "Failed to get node info ... Deadline
            # Exceeded"): met on a machine at a load of 19 (round 24, a full run beside four helpers' tests), where
            # the file's 15 tests then errored on the fixture. A new start is what a user would do. The same for its
            # raylet not registered within node.py's 30 s ("The current node timed out during startup"; round 25, at
            # CI's load with 8 busy loops beside: the fixture errored).
            slow = any(w in p.stderr for w in ("Deadline Exceeded", "timed out during startup"))
            raise PortTaken(said) if taken or slow else RuntimeError(said)
    except BaseException:
        head.end()
        raise
    return head
