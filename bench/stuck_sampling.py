"""How long sampling a whole job takes: 16 real Python processes (a launcher, 7 "ranks" and their DataLoader-like
children, sleeping, waiting on a pipe, or spinning), looked at twice a second apart by
dfdoctor.diagnose.jobstacks.sample_job, side by side with the same dumps taken one process after another.

Goal (issue 23): 16 processes in 3 s or less, both looks included. Run:
    .venv/bin/python bench/stuck_sampling.py [--procs 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time

from dfdoctor.diagnose import jobstacks, stacks, stuck

CHILD = r"""
import os, sys, time
kind = int(sys.argv[1])
if kind % 3 == 0:
    time.sleep(600)
elif kind % 3 == 1:
    os.read(os.pipe()[0], 1)  # a read that never returns
else:
    while True:
        sum(range(10000)); time.sleep(0.01)
"""


def start_tree(n: int) -> subprocess.Popen:
    """A shell launcher with n-1 Python children."""
    kids = " ".join(f"{shlex.quote(sys.executable)} -c {shlex.quote(CHILD)} {i} &" for i in range(n - 1))
    return subprocess.Popen(["sh", "-c", f"{kids} wait"], start_new_session=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    root = start_tree(a.procs)
    try:
        deadline = time.monotonic() + 30
        while len(jobstacks.tree(root.pid)) < a.procs and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # let the children reach their waits
        n = len(jobstacks.tree(root.pid))
        two, one, seq = [], [], []
        for _ in range(a.repeat):
            t = time.monotonic()
            samples = jobstacks.sample_job(root.pid)
            two.append(time.monotonic() - t)
            t = time.monotonic()
            jobstacks.sample_job(root.pid, rounds=1)
            one.append(time.monotonic() - t)
            t = time.monotonic()
            for p in jobstacks.tree(root.pid):
                stacks.dump(p.pid)
            seq.append(time.monotonic() - t)
        kinds = sorted({s.wait.kind for s in stuck.seen(samples)})
        print(f"processes sampled: {n} (py-spy {'found' if stacks.py_spy() else 'MISSING'}; cpus {os.cpu_count()})")
        print(f"two looks 1 s apart (parallel): median {statistics.median(two):.2f} s, max {max(two):.2f} s")
        print(f"one look (parallel):            median {statistics.median(one):.2f} s")
        print(f"one look (one after another):   median {statistics.median(seq):.2f} s")
        print(f"ratio sequential/parallel, one look: {statistics.median(seq) / statistics.median(one):.1f}x")
        print(f"waits seen: {', '.join(kinds)}")
        print(f"goal <= 3 s for both looks: {'MET' if max(two) <= 3.0 else 'NOT MET'}")
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
