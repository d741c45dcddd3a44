"""Where the suite's CPU goes: a pytest plugin that records, per test, the CPU seconds of the test process and of
every process it started (detached recorders and daemons included), and which Python processes it started.

On CI's 2 cores with 6 xdist workers the suite is CPU-bound, so a test's wall time says more about its neighbours
than about itself; its CPU seconds do not. Each worker moves itself into a cgroup of its own (cgroup v1 `cpuacct`,
or a v2 leaf where the unified hierarchy is writable), which every process it forks stays in, double-forked and
setsid ones too; the cgroup's usage before and after a test is its CPU. Work done inside containers, Slurm's jobs
and Ray's daemons is in their own cgroups and is not counted here.

Python starts are counted by the optional start-up hook of bench/test_cpu.py (a .pth file in the venv, present
only while that script runs): each Python process of the venv appends a line to $DFDOCTOR_CPU_METER/starts.jsonl
at its start and at its exit (its own CPU, whether torch was imported, whether torch.compile ran).

    python3 bench/test_cpu.py tests/test_x.py [pytest args]   # installs the hook, runs, summarises
    DFDOCTOR_CPU_METER=/a/folder .venv/bin/pytest ...         # tests/conftest.py loads the plugin
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

METER_ENV = "DFDOCTOR_CPU_METER"


class _Cgroup:
    """A cgroup holding this process and its descendants, with the CPU nanoseconds it has used."""

    def __init__(self, name: str) -> None:
        self.usage_file: Path | None = None
        self.path: Path | None = None
        v1 = Path("/sys/fs/cgroup/cpuacct")
        v2 = Path("/sys/fs/cgroup/unified") if Path("/sys/fs/cgroup/unified/cgroup.procs").exists() else None
        if (v1 / "cpuacct.usage").exists():
            self.path = v1 / name
            self.path.mkdir(exist_ok=True)
            self.usage_file = self.path / "cpuacct.usage"
        elif v2 is not None or Path("/sys/fs/cgroup/cgroup.procs").exists():
            base = v2 or Path("/sys/fs/cgroup")
            here = Path(open("/proc/self/cgroup").read().strip().splitlines()[-1].split(":", 2)[2].lstrip("/"))
            self.path = base / here.parent / name
            self.path.mkdir(exist_ok=True)
            self.usage_file = self.path / "cpu.stat"
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_s(self) -> float:
        if self.usage_file is None:  # no writable cgroup: the process's own and its reaped children's CPU
            import resource
            s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
        text = self.usage_file.read_text()
        if self.usage_file.name == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6

    def close(self) -> None:
        if self.path is None:
            return
        parent = self.path.parent / "cgroup.procs"
        for pid in (self.path / "cgroup.procs").read_text().split():  # leftovers: the session's guard reports them
            try:
                parent.write_text(pid)
            except OSError:
                pass
        try:
            self.path.rmdir()
        except OSError:
            pass


class CpuMeter:
    def __init__(self, folder: Path, worker: str) -> None:
        self.folder = folder
        self.cgroup = _Cgroup(f"dfdoctor-meter-{os.getpid()}")
        self.out = open(folder / f"tests-{worker}.jsonl", "a")
        self.worker = worker

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu0, self0, wall0 = self.cgroup.cpu_s(), time.process_time(), time.monotonic()
        yield
        row = {"nodeid": item.nodeid, "worker": self.worker, "cpu_s": round(self.cgroup.cpu_s() - cpu0, 3),
               "self_cpu_s": round(time.process_time() - self0, 3), "wall_s": round(time.monotonic() - wall0, 3),
               "end": time.time()}
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def pytest_unconfigure(self, config):
        self.out.close()
        self.cgroup.close()


def pytest_configure(config):
    folder = os.environ.get(METER_ENV)
    if not folder:
        return
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None and config.getoption("numprocesses", None) not in (None, 0, "0"):
        return  # the xdist controller runs no tests
    config.pluginmanager.register(CpuMeter(Path(folder), worker or "main"), "dfdoctor-cpu-meter")
