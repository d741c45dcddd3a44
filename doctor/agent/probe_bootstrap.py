"""The bootstrap that runs a probe on a target: the agent's part `probe`, run by the agent's loader in the
target's python (3.6+, standard library only; see `dfdoctor.agent.ship`). Line 2 of stdin (after the agent
itself) is the request: the probe's files, its arguments, environment, cwd and deadline.

It keeps the deadline itself (SIGUSR1 for the stacks, a grace, then SIGKILL to the probe's whole session) and
kills everything the probe started when it ends or when the connection drops (stdin closes). The answer goes
to stdout after MARK, as one JSON line: the probe's exit status, whether it timed out, its answer file.

Imported by dfdoctor only for MARK; nothing runs then.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

MARK = "@@dfdoctor-answer@@"


def main(argv=None):
    """Run the probe the request on stdin describes; its answer after MARK on stdout (`argv` is not used)."""
    req = json.loads(zlib.decompress(base64.b64decode(sys.stdin.readline())).decode())
    d = tempfile.mkdtemp(prefix="dfdoctor-probe-")
    rc, timed_out, answer = None, False, None
    try:
        out = write_files(req, d)
        rc, timed_out = run_until_deadline(req, d, out)
        if os.path.exists(out):
            with open(out) as f:
                answer = f.read()
    except OSError as exc:
        sys.stderr.write("dfdoctor bootstrap: %s\n" % exc)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.stdout.flush()
    sys.stdout.write("\n" + MARK + json.dumps({"rc": rc, "timed_out": timed_out, "answer": answer}) + "\n")
    sys.stdout.flush()
    return 0


def write_files(req, d):
    """The probe's files and input into folder `d`; the path its answer is to be written to."""
    for name, text in req["files"].items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return os.path.join(d, "answer.json")


def run_until_deadline(req, d, out):
    """Run the probe in a session of its own; (its exit status, whether its deadline passed)."""
    env = dict(os.environ)
    env.update(req["env"])
    env["DFDOCTOR_PROBE_OUT"] = out
    if req.get("input") is not None:
        env["DFDOCTOR_PROBE_IN"] = os.path.join(d, "input.json")
        with open(env["DFDOCTOR_PROBE_IN"], "w") as f:
            json.dump(req["input"], f)
    cwd = req["cwd"] if req["cwd"] and os.path.isdir(req["cwd"]) else None
    py = req["python"] or sys.executable
    flags = [] if req.get("site", True) else ["-S"]  # a probe of the standard library alone (remote_probe.line)
    p = subprocess.Popen([py] + flags + [os.path.join(d, req["script"])] + req["args"], cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    # woken by the probe's exit or dfdoctor going away (its end of our stdin closed), each seen by a thread, not
    # by a poll: a 0.05 s poll answered every probe up to 0.05 s after it ended (issue 45)
    woke, exited, gone = threading.Event(), threading.Event(), threading.Event()
    threading.Thread(target=wait_for_eof, args=(gone, woke), daemon=True).start()
    threading.Thread(target=wait_for_exit, args=(p, exited, woke), daemon=True).start()
    deadline = time.time() + req["timeout"]
    timed_out = False
    while not (exited.is_set() or gone.is_set()):
        left = deadline - time.time()
        if left <= 0:
            timed_out = True
            kill_group(p.pid, signal.SIGUSR1)  # the probe's stack dump handler
            exited.wait(req["grace"])
            break
        woke.wait(left)
    kill_group(p.pid, signal.SIGKILL)  # whatever the probe started goes with it
    return p.wait(), timed_out


def wait_for_eof(gone, woke):
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    gone.set()
    woke.set()


def wait_for_exit(p, exited, woke):
    p.wait()
    exited.set()
    woke.set()


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
