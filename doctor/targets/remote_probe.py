"""Run a probe script on a target without installing dfdoctor there: a small bootstrap and the probe's files travel
to the target's python over stdin; the bootstrap keeps the probe's deadline itself (stacks at SIGUSR1, then
SIGKILL) and kills everything the probe started when it ends or when the connection drops. The answer comes
back on stdout after a marker line.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path
from typing import Any, Optional, Sequence

MARK = "@@dfdoctor-answer@@"
STACK_GRACE_S = 0.7

# Runs in the target's python (3.6+, standard library only). Line 2 of stdin is the request.
BOOTSTRAP = r'''
import base64, json, os, shutil, signal, subprocess, sys, tempfile, threading, time, zlib
req = json.loads(zlib.decompress(base64.b64decode(sys.stdin.readline())).decode())
d = tempfile.mkdtemp(prefix="dfdoctor-probe-")
rc, timed_out, answer, p = None, False, None, None
try:
    for name, text in req["files"].items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    out = os.path.join(d, "answer.json")
    env = dict(os.environ)
    env.update(req["env"])
    env["DFDOCTOR_PROBE_OUT"] = out
    if req.get("input") is not None:
        env["DFDOCTOR_PROBE_IN"] = os.path.join(d, "input.json")
        with open(env["DFDOCTOR_PROBE_IN"], "w") as f:
            json.dump(req["input"], f)
    cwd = req["cwd"] if req["cwd"] and os.path.isdir(req["cwd"]) else None
    py = req["python"] or sys.executable
    p = subprocess.Popen([py, os.path.join(d, req["script"])] + req["args"], cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    gone = threading.Event()
    def watch():
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        gone.set()
    threading.Thread(target=watch, daemon=True).start()
    deadline = time.time() + req["timeout"]
    while p.poll() is None:
        if gone.is_set():
            break
        if time.time() > deadline:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGUSR1)
            except OSError:
                pass
            end = time.time() + req["grace"]
            while p.poll() is None and time.time() < end:
                time.sleep(0.05)
            break
        time.sleep(0.05)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    rc = p.wait()
    if os.path.exists(out):
        with open(out) as f:
            answer = f.read()
except OSError as exc:
    answer = None
    sys.stderr.write("dfdoctor bootstrap: %s\n" % exc)
finally:
    shutil.rmtree(d, ignore_errors=True)
sys.stdout.flush()
sys.stdout.write("\n" + MARK + json.dumps({"rc": rc, "timed_out": timed_out, "answer": answer}) + "\n")
sys.stdout.flush()
'''.replace("MARK", repr(MARK))

LOADER = "import sys,base64,zlib;exec(zlib.decompress(base64.b64decode(sys.stdin.readline())))"


def _pack(obj: bytes) -> bytes:
    """Compress and base64 one line for the target's stdin."""
    return base64.b64encode(zlib.compress(obj, 9)) + b"\n"


def probe_files(script: Path) -> dict[str, str]:
    """The probe and the sibling modules it imports by name (`_probe_support`, ...)."""
    text = script.read_text()
    files = {script.name: text}
    for sib in script.parent.glob("*.py"):
        if sib.name != script.name and sib.stem != "__init__" and re.search(rf"\b{re.escape(sib.stem)}\b", text):
            files[sib.name] = sib.read_text()
    return files


def request(script: Path, args: Sequence[str], *, timeout: float, env: dict[str, str], cwd: Optional[str],
            python: Optional[str], extra: Optional[dict[str, str]] = None, probe_input: Any = None) -> bytes:
    """What goes down the target's stdin: the bootstrap, then the request (`extra`: more files, by name; the
    probe's own input, which the bootstrap hands over in a file)."""
    req = {"files": {**probe_files(script), **(extra or {})}, "script": script.name, "args": list(args),
           "timeout": timeout, "grace": STACK_GRACE_S, "env": env, "cwd": cwd, "python": python,
           "input": probe_input}
    return _pack(BOOTSTRAP.encode()) + _pack(json.dumps(req).encode())


def split_answer(stdout: str) -> tuple[str, Optional[dict[str, Any]]]:
    """The probe's own stdout and the bootstrap's trailer (rc, timed_out, answer), if it got that far."""
    head, sep, tail = stdout.rpartition("\n" + MARK)
    if not sep:
        return stdout, None
    try:
        return head, json.loads(tail.strip().splitlines()[0])
    except (ValueError, IndexError):
        return head, None
