"""When each test ran, and on which xdist worker: a pytest plugin that appends one line per test (worker, start,
end, node id, CPU seconds) to the file $DFDOCTOR_TIMELINE names, for reading a full run's idle spells beside a CPU
sample (issue 45: at 8 workers on 2 cores the suite is CPU-bound; a spell where every worker waits is wall time the
CPU could have filled). `python tests/support/timeline.py FILE [CPU_SAMPLES]` summarises it.

    DFDOCTOR_TIMELINE=/tmp/timeline.txt make test    # tests/conftest.py loads the plugin
"""

from __future__ import annotations

import os
import sys
import time

TIMELINE_ENV = "DFDOCTOR_TIMELINE"
_started: dict = {}
_here = {"recording": True}


def pytest_configure(config):
    # under xdist the controller hears of every test too: only the workers (or a serial run) write
    _here["recording"] = hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def _cpu() -> float:
    """CPU seconds of this worker and of every child it has waited for (which counts their waited children too)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = (time.time(), _cpu())


def pytest_runtest_logfinish(nodeid, location):
    if not _here["recording"]:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    start, cpu = _started.pop(nodeid, (time.time(), _cpu()))
    # the fifth column: CPU seconds of the test's worker and waited children (a detached process, such as a
    # launch's recorder, is not counted: a floor, for ranking tests by what they cost)
    line = f"{worker}\t{start:.2f}\t{time.time():.2f}\t{nodeid}\t{_cpu() - cpu:.2f}\n"
    # one write of a short line to a file opened for appending: the workers' lines never interleave
    fd = os.open(os.environ[TIMELINE_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def summarise(path: str, cpu_path: str = "") -> None:
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    rows = [(r[0], float(r[1]), float(r[2]), r[3]) for r in rows]
    t0 = min(r[1] for r in rows)
    end = max(r[2] for r in rows)
    print(f"{len(rows)} tests, {end - t0:.0f} s from the first start to the last end")
    for w in sorted({r[0] for r in rows}):
        mine = sorted((r for r in rows if r[0] == w), key=lambda r: r[1])
        busy = sum(b - a for _, a, b, _ in mine)
        print(f"  {w}: {len(mine)} tests, busy {busy:.0f} s, last end at +{mine[-1][2] - t0:.0f} s "
              f"({mine[-1][3][:90]})")
    # per 10 s: how many workers were inside a test, and the machine's CPU where samples are given (lines of
    # "EPOCH_SECONDS BUSY_PERCENT", e.g. from a sampler reading /proc/stat every few seconds)
    cpu = [tuple(map(float, line.split()[:2])) for line in open(cpu_path)] if cpu_path else []
    for t in range(0, int(end - t0) + 1, 10):
        inside = sum(1 for _, a, b, _ in rows if a - t0 <= t + 5 < b - t0)
        near = [pct for when, pct in cpu if t0 + t <= when < t0 + t + 10]
        busy = f"  CPU {sum(near) / len(near):5.1f}%" if near else ""
        print(f"  +{t:4d} s  workers in a test: {inside}{busy}")


if __name__ == "__main__":
    summarise(*sys.argv[1:3])
