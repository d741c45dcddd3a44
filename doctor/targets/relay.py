"""Several probes carried by one session on a target (issue 45): the relay (`dfdoctor.agent.relay`) runs on the
target, each probe in a child of its own with its own deadline; its end here (`dfdoctor.agent.relay_here`, a
small process of its own) holds that session and serves the checks' forked workers on a Unix socket in this run's
private folder. Before, each probe was its own ssh session, `pct exec`, agent loader and
bootstrap, and target.reachable's ping one more: the relay's session is opened as soon as ssh has logged in,
while the checks are still being imported, and runs the ping first.

`prepare` starts its end here while ssh logs in, `open_for` its session once a shared connection is held,
`close` ends it and everything it runs; a worker asks
with `carry` (a probe's request) or `ping`. Whatever the relay cannot carry (not started, failed, ended, a
target or python it was not opened for) is None, and the worker takes its own session as before: what a check
finds never depends on the relay, only how fast it gets there.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from dfdoctor.agent import ship
from dfdoctor.capture import DEFAULT_LIMIT, CappedBuffer
from dfdoctor.targets import transport
from dfdoctor.targets.target import Target

RELAY_ENV = "DFDOCTOR_RELAY"  # "KEY PATH": the relay this run's workers may ask (forked workers inherit it)
CLOSE_S = 6.0  # the relay's end here is given this long to end its session before it is killed


def key(target: Target, python: str) -> str:
    """Which target and interpreter a relay serves: a probe for any other takes its own session."""
    import hashlib  # here: a local check never asks, and does not load OpenSSL for it
    return hashlib.sha1(f"{target}\0{python}\0{target.part('ssh_options') or ''}".encode()).hexdigest()[:16]


class Relay:
    """The relay's end here, as dfdoctor holds it: the process, the writing end of its stdin, its socket's
    private folder."""

    def __init__(self, proc: subprocess.Popen, lifeline: int, folder: str) -> None:
        self.proc, self.lifeline, self.folder = proc, lifeline, folder
        self.path = os.path.join(folder, "s")

    def say(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.lifeline, view):]
        except OSError:
            pass  # the relay's end is gone: every worker takes its own session

    def quit(self) -> None:
        """Say `quit`: its session's stdin is closed, and the relay ends every probe it runs and itself."""
        if self.lifeline < 0:
            return
        self.say(b"quit\n")
        os.close(self.lifeline)
        self.lifeline = -1

    def close(self) -> None:
        """`quit`, and wait until it has ended (killed if it has not within CLOSE_S)."""
        self.quit()
        try:
            self.proc.wait(CLOSE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_current: Optional[Relay] = None
_opened = False


def prepare() -> Optional[Relay]:
    """Start the relay's end here, which waits for `open_for`: called before ssh logs in, so that its own start
    (a python) is done meanwhile. None where it cannot be started."""
    global _current, _opened
    if _current is not None:
        return None
    folder = tempfile.mkdtemp(prefix="dfdoctor-relay-")  # private (0700): only this user reaches the socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    r = w = -1
    try:
        listener.bind(os.path.join(folder, "s"))
        listener.listen(64)
        r, w = os.pipe()
        proc = subprocess.Popen(ship.here_argv(sys.executable, "relay-here", str(listener.fileno()), site=False),
                                stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                pass_fds=(listener.fileno(),), start_new_session=True)
    except OSError:
        if w >= 0:
            os.close(w)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    finally:
        listener.close()  # the relay's end holds it now: no worker forked here inherits it
        if r >= 0:
            os.close(r)
    _current, _opened = Relay(proc, w, folder), False
    return _current


def open_for(target: Target, python: str, ping: tuple[str, ...] = ()) -> Optional[Relay]:
    """Start the relay for `target`'s `python` (the ping's argv run there first, when given) over this run's
    shared connection to it (prepared first when `prepare` was not called); None where no connection is held
    (the target is then reported unreachable by each check, as before) or none can be started."""
    global _opened
    master = transport.control_path(target)
    if master is None or not os.path.exists(master) or _opened:
        close()
        return None
    if _current is None and prepare() is None:
        return None
    session = transport.wrap(target, ship.stdin_argv(python, "relay", *ping))
    _current.say(json.dumps(session).encode() + b"\n" + ship.stdin_line("relay"))
    _opened = True
    os.environ[RELAY_ENV] = f"{key(target, python)} {_current.path}"
    return _current


def close(wait: bool = True) -> None:
    """End the relay this run started, if any: nothing of it outlives this call, here or on the target. Without
    `wait` it is only told to end (its probes are ended at once); a later `close` waits for it."""
    global _current, _opened
    os.environ.pop(RELAY_ENV, None)
    if _current is None:
        return
    if not wait:
        _current.quit()
        return
    relay, _current, _opened = _current, None, False
    relay.close()


def carry(target: Target, python: str, line: bytes, timeout: float, wait_s: float) -> Optional[dict[str, Any]]:
    """A probe's request (`line`: what the part `probe` reads) run by the relay: its answer (`rc`, `out`, `err`,
    or `timed_out` when none came within `wait_s`), or None when the relay cannot carry it."""
    return _ask(target, python, {"kind": "probe", "line": line.decode().strip(), "timeout": timeout}, wait_s)


def ping(target: Target, python: str, wait_s: float) -> Optional[dict[str, Any]]:
    """The ping the relay ran first (`rc`, `out`, `err`, `seconds` since its session started), given once; None
    when there is none to give."""
    return _ask(target, python, {"kind": "ping"}, wait_s)


def _ask(target: Target, python: str, req: dict[str, Any], wait_s: float) -> Optional[dict[str, Any]]:
    named = os.environ.get(RELAY_ENV, "")
    want, _, path = named.partition(" ")
    if not path or want != key(target, python):
        return None
    deadline = time.monotonic() + wait_s
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(wait_s)
            conn.connect(path)
            conn.sendall(json.dumps(req).encode() + b"\n")
            got = b""
            while not got.endswith(b"\n"):
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return None  # the relay's end went away: the worker's own session
                got += chunk
    except socket.timeout:
        return {"timed_out": True}
    except OSError:
        return None
    said = json.loads(got.decode())
    return None if said.get("down") else said


def text(b64: str) -> str:
    """One of the relay's streams, capped as a session's own is (`run_command`)."""
    buf = CappedBuffer(DEFAULT_LIMIT)
    buf.write(base64.b64decode(b64))
    return buf.text()
