"""Runs and logs through a logging FileHandler to its own file (argv[1]), every 0.2 s, for argv[2] steps (default:
about forever; `busy` as argv[3]: computing between lines, not sleeping; argv[4]: seconds between lines, 0.2 by
default); prints nothing. With --log elsewhere:
`log-elsewhere`; without --log: running, that file its log."""
import logging
import sys
import time


def busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


logging.basicConfig(filename=sys.argv[1], level=logging.INFO)
wait = busy if sys.argv[3:4] == ["busy"] else time.sleep
for step in range(int(sys.argv[2]) if len(sys.argv) > 2 else 10**6):
    logging.info("step %d", step)
    wait(float(sys.argv[4]) if len(sys.argv) > 4 else 0.2)
