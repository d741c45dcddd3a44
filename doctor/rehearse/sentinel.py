"""The rehearsal's sentinel: it stands where the training script would run, says what it sees, and ends by itself.

A rehearsal (doctor/rehearse/runner.py) copies this file into a private folder at the hop where the job runs
(`/tmp/dfdoctor-rh-TAG/sentinel.py`) and puts its path in place of the user's script, keeping the interpreter
word and the other arguments. It is run by whatever the user's line runs (`python3`, `python`, a venv's
python), so it is written for Python 3.6 and the standard library only.

It writes into its own folder:
  start.json   host, container, cwd, uid, argv, where fds 0-2 point (and whether that file is visible here),
               session, process group, tty, whether SIGHUP is ignored (nohup), its cgroups;
  beat         a counter, rewritten every BEAT_S seconds while it lives;
  end.json     how it ended: by itself, by a signal (its name), or because writing its output failed.
It prints one line on stdout and one on stderr at start, then a line on stdout every beat, as a training job
prints its progress: a job whose output goes to a session that has ended fails to write, and so does this.
It stops when `stop` appears in its folder, when the folder is gone, or after MAX_S; at MAX_S nobody has read
it (the rehearsal is bounded well below that), so it removes its folder itself.
"""

import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

BEAT_S = 0.1  # after the margin of the hang-up race, the look waits for the next beat: at most this long
MAX_S = 20.0
HERE = os.path.dirname(os.path.abspath(__file__))


def _write(name, data):
    """Write one JSON file into the folder atomically (the reader may look at any moment)."""
    fd, tmp = tempfile.mkstemp(dir=HERE, prefix="." + name)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.rename(tmp, os.path.join(HERE, name))


def _fd(fd):
    """Where one descriptor points, and whether the file it names is this very file here."""
    info = {"fd": fd}
    try:
        st = os.fstat(fd)
    except OSError as exc:
        info["closed"] = exc.strerror
        return info
    try:
        target = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        target = "?"
    info["target"] = target
    info["tty"] = os.isatty(fd)
    if target.startswith("/") and not target.startswith("/dev/pts") and target != "/dev/null":
        try:
            here = os.stat(target)
            info["visible_here"] = (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino) or (
                here.st_ino == st.st_ino and _walled(target))
        except OSError:
            info["visible_here"] = False  # opened in another mount namespace: the host's file, not ours
        info["kind"] = "file"
    elif target.startswith("pipe:"):
        info["kind"] = "pipe"
    elif target.startswith("socket:"):
        info["kind"] = "socket"
    elif target == "/dev/null":
        info["kind"] = "null"
    elif info["tty"] or target.startswith("/dev/pts") or target.startswith("/dev/tty"):
        info["kind"] = "tty"
    else:
        info["kind"] = "other"
    return info


def _walled(path):
    """Whether `path` lies under the rehearsal's second wall (an overlay named dfdoctor-wall, wall.sh): a file
    opened for writing there reports another device than its path does, though it is the same file."""
    best, walled = "", False
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                if "-" not in parts:
                    continue
                mp, rest = parts[4], parts[parts.index("-") + 1:]
                if (path + "/").startswith(mp.rstrip("/") + "/") and len(mp) >= len(best):
                    best, walled = mp, rest[:2] == ["overlay", "dfdoctor-wall"]
    except (OSError, IndexError):
        return False
    return walled


def _container():
    """What kind of container this runs in, if any (LXC and docker say so in their own ways)."""
    env = {}
    try:
        with open("/proc/1/environ", "rb") as f:
            for part in f.read().split(b"\0"):
                k, _, v = part.partition(b"=")
                env[k.decode("ascii", "replace")] = v.decode("ascii", "replace")
    except OSError:
        pass
    if env.get("container"):
        return env["container"]
    if os.path.exists("/.dockerenv"):
        return "docker"
    try:
        with open("/proc/1/cgroup") as f:
            text = f.read()
        for word in ("lxc", "docker", "kubepods"):
            if word in text:
                return word
    except OSError:
        pass
    return ""


# the folders a project keeps its virtual environment in, beside its script or one folder up (its root), and a
# README's `source .venv/bin/activate` (a pyvenv.cfg beside bin/ proves one: a folder named env proves nothing)
VENVS = (".venv", "venv", "env")
_ACTIVATE = re.compile(r"(?:^|[\s;&|(])(?:source|\.)\s+([^\s;&|'\"`$~]+)/bin/activate")
SCRIPT_MAX = 512 * 1024  # a script larger than this is not read for its imports


def _project(script, start):
    """What the fix search asks of the script's place (fix.py): the modules its top-level imports name that this
    interpreter cannot find (found, not imported: nothing of the user's runs), and the virtual environments of the
    script's folder and the one above it, each as its python's path."""
    path = os.path.abspath(script)
    try:
        with open(path, "rb") as f:
            text = f.read(SCRIPT_MAX + 1)
    except OSError:
        return
    if len(text) <= SCRIPT_MAX:
        start["modules_missing"] = _missing(text, os.path.dirname(path))
    start["venvs"] = _venvs([os.path.dirname(path), os.path.dirname(os.path.dirname(path))])


def _missing(text, folder):
    """The top-level modules of the script's module-level imports that this interpreter cannot find."""
    import ast
    import importlib.util
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module.split(".")[0])
    sys.path.insert(0, folder)  # the script's own folder comes first, as when it runs
    try:
        out = []
        for name in dict.fromkeys(names):
            try:
                if name not in sys.builtin_module_names and importlib.util.find_spec(name) is None:
                    out.append(name)
            except (ImportError, ValueError):
                out.append(name)
        return out
    finally:
        sys.path.pop(0)


def _venvs(folders):
    """The pythons of the virtual environments in `folders` (a pyvenv.cfg beside bin/ proves one)."""
    out = []
    for folder in dict.fromkeys(f for f in folders if f and f != "/"):
        named = list(VENVS)
        for readme in ("README.md", "README.rst", "README.txt", "README"):
            try:
                with open(os.path.join(folder, readme), errors="replace") as f:
                    named += _ACTIVATE.findall(f.read(256 * 1024))
            except OSError:
                continue
        for v in dict.fromkeys(named):
            root = os.path.normpath(os.path.join(folder, v))
            python = os.path.join(root, "bin", "python")
            if os.path.isfile(os.path.join(root, "pyvenv.cfg")) and os.access(python, os.X_OK) and python not in out:
                out.append(python)
    return out


def _cgroup():
    """The cgroups it runs in, as /proc says them (a login session's scope is ended with its session), or None."""
    try:
        with open("/proc/self/cgroup") as f:
            return f.read().splitlines()
    except OSError:
        return None


def _tty_name():
    """The controlling terminal, if any (from /proc: os.ttyname needs the terminal on an fd)."""
    try:
        with open("/proc/self/stat") as f:
            tty_nr = int(f.read().rsplit(")", 1)[1].split()[4])
    except (OSError, ValueError, IndexError):
        return None
    if tty_nr == 0:
        return ""
    major, minor = (tty_nr >> 8) & 0xFFF, (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
    return "/dev/pts/%d" % minor if 136 <= major <= 143 else "tty %d:%d" % (major, minor)


ended = {"how": None}


def _on_signal(signum, frame):
    """Record the signal, then die of it as the job would."""
    name = signal.Signals(signum).name if hasattr(signal, "Signals") else str(signum)
    try:
        _write("end.json", {"how": "signal", "signal": name, "after_s": round(time.time() - T0, 2)})
    except OSError:
        pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main():
    """Report, then beat until stopped, signalled, or out of time."""
    global T0
    T0 = time.time()
    # A print blocked for good (a pipe or terminal nobody reads any more) must not keep it alive: the alarm's
    # default action ends it whatever it is doing.
    signal.alarm(int(MAX_S) + 5)
    hup = signal.getsignal(signal.SIGHUP)
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) != signal.SIG_IGN:  # nohup's SIG_IGN is the fact we are here to see
            signal.signal(sig, _on_signal)
    start = {
        "pid": os.getpid(), "ppid": os.getppid(), "host": socket.gethostname(), "container": _container(),
        "cwd": os.getcwd(), "uid": os.getuid(), "argv": sys.argv, "python": sys.executable,
        "sid": os.getsid(0), "pgid": os.getpgid(0), "tty": _tty_name(), "sighup_ignored": hup == signal.SIG_IGN,
        "fds": [_fd(0), _fd(1), _fd(2)], "started_at": T0, "cgroup": _cgroup(),
    }
    try:  # the script the sentinel stands in for: is it where the job would look for it?
        # a name's bytes as the file system holds them (not UTF-8 is no reason to die: S12)
        with open(os.path.join(HERE, "script"), "rb") as f:
            script = os.fsdecode(f.read())
        if script:
            start["script"] = script
            start["script_found"] = os.path.isfile(script)
            if start["script_found"]:
                _project(script, start)
    except OSError:
        pass
    _write("start.json", start)
    beat = 0
    try:
        sys.stdout.write("dfdoctor rehearsal: the sentinel stands in for your script here (stdout)\n")
        sys.stdout.flush()
        sys.stderr.write("dfdoctor rehearsal: the sentinel stands in for your script here (stderr)\n")
        sys.stderr.flush()
        while time.time() - T0 < MAX_S:
            if not os.path.isdir(HERE):
                return
            if os.path.exists(os.path.join(HERE, "stop")):
                _write("end.json", {"how": "stopped", "after_s": round(time.time() - T0, 2)})
                return
            with open(os.path.join(HERE, "beat"), "w") as f:
                f.write(str(beat))
            sys.stdout.write("dfdoctor rehearsal: alive %d\n" % beat)
            sys.stdout.flush()
            beat += 1
            time.sleep(BEAT_S)
    except (OSError, ValueError) as exc:  # EIO on a hung-up terminal, EPIPE on a closed channel
        try:
            _write("end.json", {"how": "write-failed", "error": "%s: %s" % (type(exc).__name__, exc),
                                "after_s": round(time.time() - T0, 2)})
        except OSError:
            pass
        sys.exit(1)
    shutil.rmtree(HERE, ignore_errors=True)  # nobody came to read it: the rehearsal is long gone


if __name__ == "__main__":
    main()
