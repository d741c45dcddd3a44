"""stacks.family: the job's process tree as the watch walks it (several times a launch), read from the kernel's
children lists: the tree's own processes alone, the same processes in the same order as psutil's walk of every
process of the machine (issue 45)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from dfdoctor.agent import procfs
from dfdoctor.diagnose import stacks

# a tree: a child forked by the main thread, one forked by a second thread (the kernel lists it under that
# thread), and a grandchild; it prints its own pid once all of them run, then waits for its stdin to close
_TREE = """
import subprocess, sys, threading
kids = [subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '300'])"])]
t = threading.Thread(target=lambda: kids.append(subprocess.Popen(["sleep", "300"])))
t.start(); t.join()
print("up", flush=True)
sys.stdin.read()
"""

# walks a tree (argv[1]) with stacks.family and says which /proc entries of processes outside it were opened
_WALK = """
import json, os, sys
root, tree = int(sys.argv[1]), set(json.loads(sys.argv[2]))
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith("/proc/"):
        word = args[0].split("/")[2]
        if word.isdigit() and int(word) not in tree:
            opened.append(args[0])
from dfdoctor.diagnose import stacks
import psutil
sys.addaudithook(hook)
walked = [p.pid for p in stacks.family(root)]
print(json.dumps({"walked": walked, "outside": opened[:5], "outside_n": len(opened)}))
"""


@pytest.fixture
def tree():
    """A live tree of four processes; yields its root's pid and all its pids, psutil's walk order."""
    p = subprocess.Popen([sys.executable, "-c", _TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline() == "up\n"
        deadline = time.monotonic() + 60  # the grandchild may still be on its way (its parent runs it)
        while True:
            walk = [p.pid] + [c.pid for c in psutil.Process(p.pid).children(recursive=True)]
            if len(walk) == 4 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(walk) == 4, walk
        yield p.pid, walk
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the whole tree: its group
        p.wait(timeout=60)
        p.stdin.close()
        p.stdout.close()


def test_the_tree_is_psutils_processes_in_psutils_order(tree):
    root, walk = tree
    assert [q.pid for q in stacks.family(root)] == walk
    if procfs.kernel_lists_children():
        assert [root] + procfs.descendants(root) == walk


def test_a_walk_of_the_tree_reads_no_process_outside_it(tree):
    """psutil's walk reads /proc/PID/stat of every process of the machine, each time: the watch walks the tree
    several times a launch, on machines running hundreds of processes."""
    if not procfs.kernel_lists_children():
        pytest.skip("this kernel keeps no children lists (CONFIG_PROC_CHILDREN): psutil's walk is all there is")
    root, walk = tree
    p = subprocess.run([sys.executable, "-c", _WALK, str(root), json.dumps(walk)], capture_output=True, text=True,
                       timeout=120)
    said = json.loads(p.stdout)
    assert said["walked"] == walk, p.stdout + p.stderr
    assert said["outside_n"] == 0, said


def test_a_gone_process_has_no_tree():
    p = subprocess.Popen(["true"])
    p.wait()
    assert stacks.family(p.pid) == []
    assert procfs.children(p.pid) == []
