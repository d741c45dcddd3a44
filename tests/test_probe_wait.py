"""How the agent's probe bootstrap and the relay notice that a probe ended (issue 45): each answer is on its way as
the probe ends, not at a poll's next tick. A checked --target launch's gate waits for its last probe's answer:
the bootstrap's 0.05 s sleep between looks at its probe and the relay's 0.05 s select tick (a child that closed
its pipes is not always reapable yet) were each up to 0.05 s on that path."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import zlib
from pathlib import Path

from dfdoctor.agent import relay, ship
from dfdoctor.agent.probe_bootstrap import MARK

# runs the agent's part `probe` from this checkout's folder, counting the sleeps of every thread of it
COUNTING = """
import runpy, sys, time
slept = []
real = time.sleep
def counted(s):
    slept.append(s)
    real(s)
time.sleep = counted
sys.argv = [sys.argv[1], "probe"]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    sys.stderr.write("SLEPT %d\\n" % len(slept))
"""


def _request(script: str, timeout: float) -> bytes:
    req = {"files": {"p.py": script}, "script": "p.py", "args": [], "timeout": timeout, "grace": 0.5, "env": {},
           "cwd": None, "python": None, "input": None}
    return base64.b64encode(zlib.compress(json.dumps(req).encode())) + b"\n"


def _bootstrap(script: str, timeout: float) -> tuple[dict, int]:
    """Run the bootstrap on `script` (its stdin held open, as a session's is): its trailer and its sleeps."""
    p = subprocess.Popen([sys.executable, "-c", COUNTING, str(ship.AGENT_DIR)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p.stdin.write(_request(script, timeout))
        p.stdin.flush()
        out = p.stdout.read()  # until the bootstrap closed it (it exits after its answer)
        err = p.stderr.read()
        p.wait(60)
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
    trailer = json.loads(out.decode().rpartition("\n" + MARK)[2].splitlines()[0])
    return trailer, int(err.decode().rpartition("SLEPT ")[2].split()[0])


def test_the_bootstrap_waits_for_its_probe_without_a_poll():
    # the probe takes a while: the old loop looked at it every 0.05 s (a dozen sleeps and more)
    trailer, slept = _bootstrap("import json, os, time\ntime.sleep(0.8)\n"
                                "open(os.environ['DFDOCTOR_PROBE_OUT'], 'w').write(json.dumps({'ok': 1}))\n", 60)
    assert trailer["rc"] == 0 and not trailer["timed_out"] and json.loads(trailer["answer"]) == {"ok": 1}
    assert slept == 0


def test_the_bootstrap_keeps_its_probes_deadline_and_grace_without_a_poll():
    # a probe that ignores the stack signal: the deadline, then the whole grace, then SIGKILL
    trailer, slept = _bootstrap("import signal, time\nsignal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
                                "time.sleep(120)\n", 1.0)
    assert trailer["timed_out"] is True and trailer["rc"] == -9
    assert slept == 0


def test_the_relay_looks_again_at_once_for_a_child_that_closed_its_pipes():
    r = relay.Relay.__new__(relay.Relay)  # its loop's state alone: no stdin, no selector
    r.children = {}
    assert r.tick() is None  # nothing runs: it waits for a request
    child = relay.Child("1", 0, None, 101, 102, 0.0)
    r.children["1"] = child
    assert r.tick() == relay.TICK_S
    child.open.discard(101)
    assert r.tick() == relay.TICK_S  # one pipe still open: the probe runs on
    child.open.discard(102)  # both closed: os._exit closed them, it is reapable in a moment
    assert r.tick() <= 0.005
