"""The relay's end on this machine (the agent's part `relay-here`, run here, never shipped): it holds the one
session that carries the relay (`dfdoctor.agent.relay`) on the target, and serves the checks' workers on a Unix
socket dfdoctor made and handed over (its fd, the first argument). A worker sends one line (`{"kind": "probe", "line": REQUEST,
"timeout": S}` or `{"kind": "ping"}`) and reads one line back: the relay's answer (`rc`, `out`, `err` in base64,
`seconds`), or `{"down": true}` when the relay cannot carry it (not started, ended, or the ping already given):
the worker then takes its own session, as before the relay. A worker that goes away before its answer cancels
its request there (its probe is ended, as a dropped session's is).

It is started while ssh logs in (its own start is then off the way to the checks): stdin (fd 0) brings the
session's argv (JSON) once the shared connection is up, then the relay's agent line (its zip, for the loader on
the target), then nothing until dfdoctor says `quit` or goes away (EOF): the session's stdin is then closed,
which ends the relay and every probe it runs; the session is killed if it is still there GRACE_S later.
argv: [`relay-here`, FD].
"""

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

READY = "@@dfdoctor-relay-ready@@"  # dfdoctor.agent.relay's (not imported: this part runs alone, from the folder)
PING_ID = "ping"
GRACE_S = 3.0
READY_WITHIN_S = 10.0  # a relay not ready by then carries nothing: each worker takes its own session


class Here(object):
    def __init__(self, listener):
        self.sel = selectors.DefaultSelector()
        self.listener = listener
        self.began = None
        self.session = None  # started by dfdoctor's first line (once ssh has logged in)
        self.ready = self.down = self.quit = False
        self.ping = None  # the ping's answer, given once
        self.ping_asked = []
        self.parked = []  # (conn, line) sent before the relay was ready
        self.asked = {}  # id -> conn
        self.conns = {}  # conn -> [buffer, id or None]
        self.next_id = 0
        self.out = b""
        self.sel.register(0, selectors.EVENT_READ, "dfdoctor")
        self.sel.register(listener, selectors.EVENT_READ, "listen")
        self.lifeline = b""

    def start(self, argv):
        """The session that carries the relay (dfdoctor's first line names it)."""
        self.began = time.monotonic()
        try:
            self.session = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return self.fall()
        self.sel.register(self.session.stdout, selectors.EVENT_READ, "session")
        return None

    # -- dfdoctor's side --------------------------------------------------------------------------------------
    def from_dfdoctor(self):
        chunk = os.read(0, 1 << 16)
        if not chunk:
            self.sel.unregister(0)
            self.quit = True
            return
        self.lifeline += chunk
        while b"\n" in self.lifeline:
            line, self.lifeline = self.lifeline.split(b"\n", 1)
            if line == b"quit":
                self.quit = True
            elif self.session is None and not self.down:  # the session's argv, as JSON
                self.start(json.loads(line.decode()))
            elif line:  # the agent's line, for the loader on the target
                self.send(line + b"\n")

    def send(self, data):
        if self.down or self.session is None:
            return
        try:
            self.session.stdin.write(data)
            self.session.stdin.flush()
        except OSError:
            self.fall()

    # -- the workers' side ------------------------------------------------------------------------------------
    def accept(self):
        conn, _ = self.listener.accept()
        conn.setblocking(True)
        self.conns[conn] = [b"", None]
        self.sel.register(conn, selectors.EVENT_READ, "conn")

    def from_worker(self, conn):
        try:
            chunk = conn.recv(1 << 16)
        except OSError:
            chunk = b""
        state = self.conns[conn]
        if not chunk:  # the worker is gone: its probe too
            if state[1] is not None and state[1] in self.asked:
                del self.asked[state[1]]
                self.send(("%s cancel\n" % state[1]).encode())
            self.forget(conn)
            return
        state[0] += chunk
        if b"\n" in state[0] and state[1] is None:
            line, state[0] = state[0].split(b"\n", 1)
            self.ask(conn, json.loads(line.decode()))

    def ask(self, conn, req):
        if self.down:
            return self.reply(conn, {"down": True})
        if req.get("kind") == "ping":  # the ping the relay ran first, given once (a later one is the asker's own)
            if self.ping is None:
                self.ping_asked.append(conn)
                return None
            given, self.ping = self.ping, False
            return self.reply(conn, given or {"down": True})
        if not self.ready:
            self.parked.append((conn, req))
            return None
        self.next_id += 1
        rid = str(self.next_id)
        self.conns[conn][1] = rid
        self.asked[rid] = conn
        self.send(("%s %s %s\n" % (rid, float(req["timeout"]), req["line"])).encode())
        return None

    def reply(self, conn, said):
        try:
            conn.sendall((json.dumps(said) + "\n").encode())
        except OSError:
            pass
        self.forget(conn)

    def forget(self, conn):
        if conn in self.conns:
            del self.conns[conn]
            self.sel.unregister(conn)
            conn.close()

    # -- the session's side ------------------------------------------------------------------------------------
    def from_session(self):
        chunk = os.read(self.session.stdout.fileno(), 1 << 16)
        if not chunk:
            self.sel.unregister(self.session.stdout)
            return self.fall()
        self.out += chunk
        while b"\n" in self.out:
            line, self.out = self.out.split(b"\n", 1)
            self.said(line.decode("utf-8", "replace"))
        return None

    def said(self, line):
        if line == READY:
            self.ready = True
            parked, self.parked = self.parked, []
            for conn, req in parked:
                self.ask(conn, req)
            return
        rid, _, rest = line.partition(" ")
        if rid == PING_ID and self.ping is None:  # null: the relay was started without one
            pinged = json.loads(rest)
            self.ping = dict(pinged, seconds=time.monotonic() - self.began) if pinged else False
            for conn in self.ping_asked:
                self.ask(conn, {"kind": "ping"})
            self.ping_asked = []
        elif rid in self.asked:
            self.reply(self.asked.pop(rid), json.loads(rest))

    def fall(self):
        """The session ended or failed: every worker waiting takes its own session."""
        self.down = True
        for conn in list(self.conns):  # those waiting for the ping or parked are among them
            self.reply(conn, {"down": True})
        self.asked, self.ping_asked, self.parked = {}, [], []

    def run(self):
        while not self.quit:
            waiting = not (self.ready or self.down) and self.began is not None
            left = (self.began or 0) + READY_WITHIN_S - time.monotonic()
            if waiting and left <= 0:  # a relay that does not start: the workers take their own sessions
                self.fall()
                continue
            for key, _ in self.sel.select(timeout=left if waiting else None):
                what = key.data
                if what == "dfdoctor":
                    self.from_dfdoctor()
                elif what == "listen":
                    self.accept()
                elif what == "session":
                    self.from_session()
                else:
                    self.from_worker(key.fileobj)
        self.end()

    def end(self):
        """Close the session's stdin (the relay ends its probes and itself); kill what is left GRACE_S later."""
        self.fall()
        if self.session is None:
            return
        try:
            self.session.stdin.close()
        except OSError:
            pass
        try:
            self.session.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.session.pid, signal.SIGKILL)
            except OSError:
                pass
            self.session.wait()


def main(argv):
    """argv: [`relay-here`, FD (the listening socket)]."""
    for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT"):  # dfdoctor ends it (quit, or EOF when it is gone)
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    listener = socket.socket(fileno=int(argv[1]))
    listener.setblocking(False)
    Here(listener).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
