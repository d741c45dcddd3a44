"""The relay: several probes carried by one session on a target (issue 45: each probe was its own ssh session,
`pct exec`, agent loader and bootstrap). The agent's part `relay`, run by the agent's loader in the target's
python like the part `probe`, and kept there while dfdoctor's checks run.

It first runs the target's ping (target.reachable's shell line, given as its arguments) as a child, and says it
is ready. Then each line of stdin is `ID REQUEST` (REQUEST: what the part `probe` reads as its line 2) or
`ID cancel`. Each request runs in a child of its own, forked from the relay: the part `probe`'s own `main`, with
its own pipes, so it keeps its probe's deadline and kills everything the probe started when its stdin closes,
exactly as one started by its own session does. Each child's answer goes back as it ends, one line
`ID {"rc", "out", "err"}` (stdout and stderr in base64); a child that outlives its deadline by far is killed and
answered with what it said so far, and a hung or crashed probe is that request's answer alone. `cancel` (the
check that asked is gone) and the end of stdin (dfdoctor is gone) close the children's stdin: each ends its
probe, and a child still there two seconds later is killed.

Imported by dfdoctor only for its marks; nothing runs then.
"""

import base64
import json
import os
import selectors
import signal
import subprocess
import sys
import time

from dfdoctor.agent import probe_bootstrap
from dfdoctor.agent.ending import returncode

READY = "@@dfdoctor-relay-ready@@"
PING_ID = "ping"
OVERRUN_S = 5.0  # past a request's own deadline and grace: its child is killed (the bootstrap keeps the deadline)
GONE_GRACE_S = 2.0  # children told to end (stdin closed) get this long before SIGKILL
TICK_S = 0.05  # how often the children are looked at for deadlines while any runs
LEAVING_TICK_S = 0.005  # ... and while one that closed its pipes (it is exiting) is not yet reapable


class Child(object):
    """One request's forked bootstrap (or the ping's shell): its pipes, what it said, its deadline."""

    def __init__(self, rid, pid, stdin, out, err, deadline):
        self.rid, self.pid, self.stdin, self.deadline = rid, pid, stdin, deadline
        self.said = {out: bytearray(), err: bytearray()}
        self.out, self.err = out, err
        self.open = {out, err}
        self.closing_at = None

    def close_stdin(self, now):
        if self.stdin is not None:
            try:
                os.close(self.stdin)
            except OSError:
                pass
            self.stdin = None
            self.closing_at = now


def start_request(rid, line, timeout):
    """Fork the part `probe` for one request: `line` is its line 2; its pipes are the child's own."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        rc = 70
        try:
            for fd, to in ((in_r, 0), (out_w, 1), (err_w, 2)):
                os.dup2(fd, to)
            os.closerange(3, 1 << 16)  # no other child's pipe: each must see its own stdin close
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(sig, signal.SIG_DFL)
            rc = probe_bootstrap.main([])
        except BaseException as exc:  # said on its stderr: the answer of this request alone
            try:
                os.write(2, ("dfdoctor relay: %r\n" % (exc,)).encode())
            except OSError:
                pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass
            os._exit(rc)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    view = memoryview(line)
    while view:  # the child reads its line at once: a write larger than the pipe waits for it
        view = view[os.write(in_w, view):]
    return Child(rid, pid, in_w, out_r, err_r, time.monotonic() + timeout + OVERRUN_S)


def start_ping(argv):
    """The ping's shell, as target.reachable runs it over its own session (argv: `sh -c PING sh PYTHON`)."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = os.dup(p.stdout.fileno()), os.dup(p.stderr.fileno())  # read raw in the loop
    p.stdout.close()
    p.stderr.close()
    child = Child(PING_ID, p.pid, None, out, err, time.monotonic() + 15)
    child.popen = p
    return child


def answer(child, rc):
    """The child's answer as one line on stdout."""
    said = {"rc": rc, "out": base64.b64encode(bytes(child.said[child.out])).decode(),
            "err": base64.b64encode(bytes(child.said[child.err])).decode()}
    sys.stdout.write("%s %s\n" % (child.rid, json.dumps(said)))
    sys.stdout.flush()


class Relay(object):
    def __init__(self, ping):
        self.sel = selectors.DefaultSelector()
        self.children = {}
        self.pending = b""
        self.gone = False
        os.set_blocking(0, False)
        self.sel.register(0, selectors.EVENT_READ, None)
        if ping:
            self.add(start_ping(ping))

    def add(self, child):
        self.children[child.rid] = child
        for fd in child.open:
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, child)

    def read_stdin(self):
        try:
            chunk = os.read(0, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.sel.unregister(0)
            self.gone = True
            now = time.monotonic()
            for c in self.children.values():
                c.close_stdin(now)
            return
        self.pending += chunk
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            self.request(line)

    def request(self, line):
        rid, _, rest = line.decode("ascii", "replace").partition(" ")
        if rest.strip() == "cancel":
            if rid in self.children:
                self.children[rid].close_stdin(time.monotonic())
            return
        try:
            timeout = float(rest.split(" ", 1)[0])
            body = rest.split(" ", 1)[1]
        except (ValueError, IndexError):
            return
        self.add(start_request(rid, body.encode() + b"\n", timeout))

    def read_child(self, child, fd):
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            child.said[fd] += chunk
            return
        self.sel.unregister(fd)
        os.close(fd)
        child.open.discard(fd)

    def reap(self):
        """Answer every child whose pipes closed and that exited; kill those past their deadline."""
        now = time.monotonic()
        for rid, c in list(self.children.items()):
            late = now > c.deadline or (c.closing_at is not None and now > c.closing_at + GONE_GRACE_S)
            if late:
                kill(c.pid)
            if c.open and not late:
                continue
            try:
                pid, status = os.waitpid(c.pid, 0 if late else os.WNOHANG)
            except ChildProcessError:
                pid, status = c.pid, 0
            if pid == 0:
                continue
            for fd in list(c.open):
                self.sel.unregister(fd)
                os.close(fd)
            c.close_stdin(now)
            del self.children[rid]
            if not self.gone:
                answer(c, returncode(status))

    def tick(self):
        """How long the loop may wait for a pipe: a child whose pipes both closed is exiting (os._exit closed
        them) but may not be reapable yet; it is looked for again at once, not a whole tick later (the last
        answer of a checked launch's gate waited up to 0.05 s for it, issue 45)."""
        if not self.children:
            return None
        return LEAVING_TICK_S if any(not c.open for c in self.children.values()) else TICK_S

    def run(self):
        while not (self.gone and not self.children):
            for key, _ in self.sel.select(timeout=self.tick()):
                if key.data is None:
                    self.read_stdin()
                else:
                    self.read_child(key.data, key.fd)
            self.reap()


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def main(argv=None):
    """argv: [`relay`, the ping's argv...] (no ping when empty)."""
    ping = list((argv or [])[1:])
    relay = Relay(ping)
    sys.stdout.write(READY + "\n" + ("" if ping else PING_ID + " null\n"))  # no ping: said at once
    sys.stdout.flush()
    relay.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
