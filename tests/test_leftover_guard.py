"""The session's leftover guard (conftest.no_leftover_processes) names only processes that are really left: one
still ending by itself a few seconds after the session (a look's ssh session, a daemon's stop on a loaded machine)
is waited for, a zombie has ended, and one that stays is named."""
import subprocess
import time
from typing import Callable

import psutil

import conftest
from conftest import left_behind, marked_processes


def _only(procs: list) -> Callable[[], list]:
    """The guard's finder, narrowed to this test's own processes (others of this worker may run)."""
    pids = {p.pid for p in procs}
    return lambda: [p for p in marked_processes() if p.pid in pids]


def test_a_process_ending_by_itself_after_the_old_five_seconds_is_no_leftover():
    ending = subprocess.Popen(["sleep", "8"], stdin=subprocess.DEVNULL)
    try:
        began = time.monotonic()
        assert not left_behind(conftest.LEFT_GRACE_S, _only([ending]))
        assert time.monotonic() - began >= 7  # it was waited for, not missed
    finally:
        ending.kill()
        ending.wait()


def test_a_process_that_stays_is_named_and_a_zombie_is_not():
    stays = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
    ended = subprocess.Popen(["true"], stdin=subprocess.DEVNULL)  # not waited for yet: a zombie
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(ended.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        left = left_behind(1.0, _only([stays, ended]))
        assert [p.pid for p in left] == [stays.pid]
    finally:
        stays.kill()
        stays.wait()
        ended.wait()
