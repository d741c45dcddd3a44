"""How the recorder takes its place: it leaves the caller's session (`--detach`), and reads and keeps the spec
of what to run. Standard library only."""

import json
import os
import signal
import sys

from dfdoctor.agent.atomic import replace_atomically
from dfdoctor.agent.procfs import read_text


def detach(run_dir):
    """Leave the caller's session for good: SIGHUP ignored before forking, a new session, stdin from
    /dev/null, output to RUN_DIR/recorder.out. The caller gets the recorder's pid on stdout and returns."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        answer = os.read(r, 64)
        os.waitpid(pid, 0)
        sys.stdout.write(answer.decode() + "\n")
        sys.stdout.flush()
        os._exit(0 if answer else 1)
    os.close(r)
    os.setsid()
    if os.fork():
        os._exit(0)  # the session leader goes; its child can never regain a terminal
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(os.path.join(run_dir, "recorder.out"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    os.write(w, str(os.getpid()).encode())
    os.close(w)


def read_spec(run_dir, given=None):
    """The spec as handed over, unmasked: `-` on stdin, SPEC_JSON itself, else the one-shot RUN_DIR/spec.in
    (deleted once read), else RUN_DIR/spec.json."""
    if given == "-":
        spec = json.loads(sys.stdin.read())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # nothing keeps the pipe dfdoctor handed the spec through
        os.close(null)
        return spec
    if given is not None:
        return json.loads(given)
    one_shot = os.path.join(run_dir, "spec.in")
    try:
        with open(one_shot) as f:
            spec = json.load(f)
    except FileNotFoundError:
        with open(os.path.join(run_dir, "spec.json")) as f:
            return json.load(f)
    finally:
        try:
            os.unlink(one_shot)
        except OSError:
            pass
    return spec


def keep_spec(run_dir, spec, masker):
    """RUN_DIR/spec.json: the spec masked (replaced atomically, and only when it would change)."""
    text = json.dumps(masker.value(spec), indent=1)
    path = os.path.join(run_dir, "spec.json")
    if read_text(path) == text:
        return
    replace_atomically(path, lambda f: f.write(text))  # 0600, a name nobody could plant
