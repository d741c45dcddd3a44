"""Find by experiment which launch survives the end of its session on a target.

Through the real chain (ssh, pct exec, lxc-attach), each strategy starts a harmless sentinel (a heartbeat file;
it ends by itself after MAX_BEATS), with and without a tty, returning at once or after a pause. Then a fresh
session looks at which heartbeats still move and where the logs landed. Every sentinel is stopped and the
scratch folder removed in `finally`, and a sentinel stops by itself when its folder is gone.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

from dfdoctor import cache
from dfdoctor.shellquote import quote
from dfdoctor.targets import Target, transport
from dfdoctor.targets.strategies import BY_NAME, PREFERENCE, STRATEGIES, Strategy
from dfdoctor.terminal_signals import as_from_a_terminal

BEAT_S = 0.1  # after the margin the look waits for each survivor's next beat: at most this long
MAX_BEATS = 300  # 30 s: a sentinel never outlives the probe by long, whatever happens to dfdoctor
GONE_S = 0.75  # a sentinel whose beat has not come this long after the margin is gone (a loaded machine's beats lag)
RETURN_TIMEOUT_S = 4.0  # a session that has not returned by then is "held open" and gets closed, like Ctrl-C
SETTLE_S = 0.5  # the margin: how long after its session ended a sentinel must still beat to count as a survivor
# (the hang-up race: bench/hangup_margin.py measured under 0.01 s here; the rest is for a round trip on a network)
POLL_S = 0.05  # how often the look reads the heartbeats while it waits for the next one
PARALLEL = 8  # sessions at once: below OpenSSH's default MaxSessions (10) on a shared connection
CACHE_KIND = "target-detach"
REUSE_S = 86400.0  # an answer is reused for a day while its key holds (same boot, same interpreters)

SENTINEL = f"""#!/bin/sh
# dfdoctor persistence sentinel: beats into a file, writes nothing else, ends by itself.
d=$(dirname "$0"); n=$1; i=0
echo $$ > "$d/$n.pid"
while [ $i -lt {MAX_BEATS} ] && [ -d "$d" ] && [ ! -e "$d/stop" ]; do
  echo "beat $i" || exit 5   # a job printing to a dead terminal or channel dies: so does the sentinel
  echo $i > "$d/$n.hb"
  i=$((i+1))
  sleep {BEAT_S}
done
rm -f "$d/$n.pid"
"""

SETUP = """set -e
d=$(mktemp -d /tmp/dfdoctor-persist.XXXXXX)
cat > "$d/s"
echo "dir=$d"
for t in nohup setsid tmux screen at python3 python systemd-run; do
  command -v "$t" >/dev/null 2>&1 && echo "have=$t"
done
echo "pid1=$(cat /proc/1/comm 2>/dev/null)"
# atd may run outside this session's PID namespace, where /proc cannot see it: its pid file says so too
# (one grep over every process's name: a `cat` per process took a tenth of a second on a loaded host)
if [ -s /run/atd.pid ] || [ -s /var/run/atd.pid ] || grep -qx atd /proc/[0-9]*/comm 2>/dev/null; then
  echo "have=atd"
fi
true
"""

# The look waits for events, not for time: first until the margin the hang-up race needs has passed since the
# last session ended (`$2`, what is left of it when the look starts: its own connection time counts), then for
# each sentinel's next heartbeat. A beat written after the margin is a survivor; one that has not come within
# GONE_S is gone. The pid files cannot say so: a session may run in a PID namespace of its own.
CHECK = """d=$1; wait=$2; shift 2
[ "$wait" = 0 ] || sleep "$wait"
for n in "$@"; do eval "a_$(echo "$n" | tr -c 'a-zA-Z0-9\\n' _)=$(cat "$d/$n.hb" 2>/dev/null || echo x)"; done
i=0
while [ $i -lt {polls} ]; do
  moved=1
  for n in "$@"; do
    v=$(echo "$n" | tr -c 'a-zA-Z0-9\\n' _); eval "a=\\$a_$v"
    [ "$(cat "$d/$n.hb" 2>/dev/null || echo x)" = "$a" ] && moved=0 && break
  done
  [ $moved = 1 ] && break
  sleep {poll}; i=$((i+1))
done
for n in "$@"; do
  v=$(echo "$n" | tr -c 'a-zA-Z0-9\\n' _); eval "a=\\$a_$v"; b=$(cat "$d/$n.hb" 2>/dev/null || echo x)
  log=none
  if [ -s "$d/$n/log" ]; then log=log; elif [ -s "$d/$n/nohup.out" ]; then log=nohup.out; fi
  echo "$n first=$a now=$b log=$log"
done
"""

# What would change a target's answer: a reboot (its boot id; for a container, the host kernel's) and the
# interpreters the trials and the recorder run under (resolved path, size and mtime: an upgrade changes them).
IDENTITY = """cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown
for w in "$@"; do
  p=$(command -v "$w" 2>/dev/null) || { echo "$w -"; continue; }
  r=$(readlink -f "$p" 2>/dev/null || echo "$p")
  echo "$w $r $(stat -c %s-%Y "$r" 2>/dev/null)"
done
"""

CLEANUP = """d=$1
[ -d "$d" ] || exit 0
touch "$d/stop"
kill_ours() {{  # only a process whose command line names our sentinel: a pid from another namespace is not ours
  for p in "$d"/*.pid; do
    [ -f "$p" ] || continue
    pid=$(cat "$p" 2>/dev/null)
    [ -n "$pid" ] && tr '\\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$d/s" && kill -9 "$pid" 2>/dev/null
  done
}}
kill_ours
if command -v tmux >/dev/null 2>&1; then
  for s in $(tmux ls -F '#{{session_name}}' 2>/dev/null | grep '^dfdoctor-{tag}'); do tmux kill-session -t "$s"; done
fi
if command -v screen >/dev/null 2>&1; then
  for s in $(screen -ls 2>/dev/null | grep -o '[0-9]*\\.dfdoctor-{tag}[^ \t]*'); do screen -S "$s" -X quit; done
fi
if command -v atq >/dev/null 2>&1; then  # an at job that has not started yet (atd not woken) must not start later
  for j in $(atq 2>/dev/null | cut -f1); do at -c "$j" 2>/dev/null | grep -q "$d/s" && atrm "$j"; done
fi
sleep {beat}
kill_ours
# The folder is renamed before it is removed: a sentinel a late session started (tmux's server forks it when it
# gets to it) checks for the folder and the stop file before each beat, and `rm -rf` deletes the stop file before
# the folder, so one starting in between wrote its beat into a folder rm could no longer remove, and beat on for
# MAX_BEATS (round 21's CI). Renamed, the folder is gone for it at once: its next check ends it. It moves into a
# folder of its own that mktemp made (a fixed name beside it could be planted by another user of the target).
g=$(mktemp -d "$(dirname "$d")/dfdoctor-persist.gone.XXXXXX" 2>/dev/null) && mv "$d" "$g/" 2>/dev/null || \
  {{ [ -n "$g" ] && rmdir "$g" 2>/dev/null; g=$d; }}
for i in 1 2 3 4 5; do rm -rf "$g" 2>/dev/null; [ -e "$g" ] || break; sleep {beat}; done
# one grep over every command line (two processes for each one took a tenth of a second on a loaded host); its
# pattern's `[s]` keeps the grep from finding itself
left=$(grep -l "$d/[s]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)
echo "left=$((left))"
"""


@dataclass
class Trial:
    """One strategy started one way: what the session did and what became of the sentinel."""

    strategy: Strategy
    tty: bool
    pause: float
    name: str
    returned_s: Optional[float] = None
    held: bool = False
    rc: Optional[int] = None
    stderr: str = ""
    survived: Optional[bool] = None
    log: str = "none"
    ended_at: float = 0.0
    held_after: float = RETURN_TIMEOUT_S  # how long the session was given before it counted as held open

    def row(self) -> dict:
        """The trial as a matrix row."""
        return {"strategy": self.strategy.name, "tty": "yes" if self.tty else "no", "pause_s": self.pause,
                "session returned": (f"held open (closed after {self.held_after:.0f} s)" if self.held
                                     else f"{self.returned_s:.2f} s" if self.returned_s is not None else "?"),
                "survived": {True: "yes", False: "no", None: "?"}[self.survived],
                "log": {"log": "where redirected", "nohup.out": "nohup.out", "none": "none"}[self.log],
                "error": self.stderr.strip().splitlines()[-1][:160] if self.stderr.strip() else ""}

    def to_json(self) -> dict:
        """Everything the check reads of a trial, for the cache."""
        return {"strategy": self.strategy.name, "tty": self.tty, "pause": self.pause, "name": self.name,
                "returned_s": self.returned_s, "held": self.held, "rc": self.rc, "stderr": self.stderr,
                "survived": self.survived, "log": self.log, "held_after": self.held_after}

    @classmethod
    def from_json(cls, d: dict) -> "Trial":
        """A trial read back from the cache."""
        return cls(BY_NAME[d["strategy"]], bool(d["tty"]), float(d["pause"]), str(d["name"]),
                   d.get("returned_s"), bool(d.get("held")), d.get("rc"), str(d.get("stderr") or ""),
                   d.get("survived"), str(d.get("log") or "none"), held_after=float(d.get("held_after") or 0))


@dataclass
class Outcome:
    """The whole experiment on one target."""

    target: str
    facts: dict[str, object] = field(default_factory=dict)
    trials: list[Trial] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    best: Optional[str] = None
    best_needs_no_tty: bool = False
    seconds: float = 0.0
    left_behind: Optional[int] = None
    error: Optional[str] = None
    unreachable: Optional[str] = None  # the transport's own words when the target could not be reached at all
    identity: Optional[dict] = None  # what the answer is keyed by (boot id, interpreters); None: not reusable
    cached_at: Optional[float] = None  # when the reused answer was observed (epoch seconds); None: observed now

    def to_json(self) -> dict:
        """The outcome for the cache."""
        return {"target": self.target, "facts": self.facts, "trials": [t.to_json() for t in self.trials],
                "skipped": self.skipped, "best": self.best, "best_needs_no_tty": self.best_needs_no_tty,
                "seconds": self.seconds, "left_behind": self.left_behind}

    @classmethod
    def from_json(cls, d: dict) -> "Outcome":
        """An outcome read back from the cache."""
        return cls(str(d["target"]), dict(d.get("facts") or {}), [Trial.from_json(t) for t in d["trials"]],
                   dict(d.get("skipped") or {}), d.get("best"), bool(d.get("best_needs_no_tty")),
                   float(d.get("seconds") or 0), d.get("left_behind"))

    @property
    def matrix(self) -> list[dict]:
        """Every trial as a table row."""
        return [t.row() for t in self.trials]


def _call(target: Target, script: str, args: Sequence[str] = (), *, timeout: float = 15, stdin: bytes = b"",
          tty: bool = False) -> subprocess.CompletedProcess:
    """Run one small script on the target through the transport (a killable subprocess)."""
    argv = transport.wrap(target, ["sh", "-c", script, "sh", *args], tty=tty)
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(p)
        out, err = p.communicate()
        return subprocess.CompletedProcess(argv, -9, out.decode(errors="replace"),
                                           err.decode(errors="replace") + f"\ntimed out after {timeout:.0f} s")
    return subprocess.CompletedProcess(argv, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def _kill(p: subprocess.Popen) -> None:
    """Kill a subprocess's whole group (it runs in its own session)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _may_hold(t: Trial) -> bool:
    """Trials whose output stays tied to a session without a tty: ssh waits for them until closed."""
    return not t.tty and "{log}" not in t.strategy.template


def _available(s: Strategy, have: set[str], pid1: str) -> Optional[str]:
    """Why a strategy cannot be tried on this target, or None."""
    for need in s.needs:
        if need == "python" and not ({"python3", "python"} & have):
            return "no python on the target"
        if need == "systemd" and (pid1 != "systemd" or "systemd-run" not in have):
            return f"PID 1 is {pid1 or '?'}, not systemd"
        if need not in ("python", "systemd") and need not in have:
            return f"no {need} on the target"
    return None


def _start(target: Target, t: Trial, d: str, python: str, slack: float = 0.0) -> Trial:
    """Start one sentinel the way the trial says; time how long the session takes to return.

    `slack` is what a session that does nothing took here (the set-up's): on a loaded machine ssh, pct exec and
    lxc-attach alone can take seconds, and a session must not count as held open for that."""
    line = t.strategy.line(["sh", f"{d}/s", t.name], "log", name=t.name, python=python)
    # Only while the experiment lives: a session still in flight when the watchdog cleaned up must not
    # recreate the folder.
    script = (f"[ -e {quote(d)}/s ] && [ ! -e {quote(d)}/stop ] && mkdir {quote(d)}/{t.name} && "
              f"cd {quote(d)}/{t.name} || exit 97\n")
    if t.pause:
        script += f"{line}\nsleep {t.pause}\n"
    else:
        # exactly what `sh -c 'LINE'` does when LINE is one command: the shell execs it, so the session's
        # attached process is the launcher itself and ends the moment it returns
        script += f"exec sh -c {quote(line)}\n"
    argv = transport.shell(target, script, tty=t.tty)
    start = time.monotonic()
    # as from a terminal: under `nohup` the trials inherited SIGHUP ignored and `&` survived a tty's hang-up
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=as_from_a_terminal())
    try:
        t.held_after = RETURN_TIMEOUT_S + slack + t.pause
        out, err = p.communicate(timeout=t.held_after)
        t.returned_s = time.monotonic() - start
    except subprocess.TimeoutExpired:
        t.held = True
        _kill(p)  # what a user does to a session that hangs: Ctrl-C, close the laptop
        out, err = p.communicate()
    t.rc = p.returncode
    t.stderr = (err.decode(errors="replace") + (out.decode(errors="replace") if t.tty else "")).replace("\r", "")
    t.stderr = "\n".join(ln for ln in t.stderr.splitlines() if ln.strip() and not ln.startswith("beat "))
    t.ended_at = time.monotonic()
    return t


def run(target: Target, *, ttys: Sequence[bool] = (False, True), pauses: Sequence[float] = (0.0, 0.5),
        only: Optional[Sequence[str]] = None, parallel: int = PARALLEL) -> Outcome:
    """The experiment: set up, start every trial, look, and always clean up."""
    began = time.monotonic()
    res = Outcome(str(target))
    tag = f"{os.getpid()}x{int(time.time()) % 100000}"
    setup_began = time.monotonic()
    setup = _call(target, SETUP, stdin=SENTINEL.encode())
    slack = min(10.0, 2 * (time.monotonic() - setup_began))
    if setup.returncode != 0 or "dir=" not in setup.stdout:
        res.unreachable = transport.transport_error(target, setup.returncode, setup.stderr)
        res.error = res.unreachable or setup.stderr.strip()[-300:] or f"setup exited {setup.returncode}"
        res.seconds = time.monotonic() - began
        return res
    facts = dict(ln.split("=", 1) for ln in setup.stdout.splitlines() if "=" in ln and not ln.startswith("have="))
    have = {ln.split("=", 1)[1] for ln in setup.stdout.splitlines() if ln.startswith("have=")}
    d = facts["dir"]
    res.facts = {"dir": d, "pid1": facts.get("pid1", ""), "tools": sorted(have)}
    python = "python3" if "python3" in have else "python"
    cleanup = CLEANUP.format(tag=tag, beat=BEAT_S)
    # The watchdog: a session on the target that waits for EOF on its stdin, then cleans up. Our end of that
    # pipe closes however this process ends (even SIGKILL), so the sentinels never outlive the probe by long.
    watchdog = _watchdog(target, cleanup, d)
    try:
        for s in STRATEGIES:
            if only and s.name not in only:
                continue
            why = _available(s, have, facts.get("pid1", ""))
            if why:
                res.skipped[s.name] = why
                continue
            for tty in ttys:
                for pause in pauses:
                    name = f"{tag}-{s.name}-{'t' if tty else 'n'}{int(pause * 10)}"
                    res.trials.append(Trial(s, tty, pause, name))
        # Longest first (pauses, sessions that will be held open), so the waits overlap instead of trailing.
        longest_first = sorted(res.trials, key=lambda t: -(t.pause + (RETURN_TIMEOUT_S if _may_hold(t) else 0)))
        # imported here: concurrent.futures brings logging, 0.002 CPU-s of every check and launch that only loads
        # the persistence check
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            list(pool.map(lambda t: _start(target, t, d, python, slack), longest_first))
        last = max((t.ended_at for t in res.trials), default=time.monotonic())
        _look(target, res, d, wait=max(0.0, last + SETTLE_S - time.monotonic()))
    finally:
        res.left_behind = _clean(target, watchdog, cleanup, d)
    res.best, res.best_needs_no_tty = _best(res.trials)
    res.seconds = time.monotonic() - began
    return res


def identity(target: Target, interpreters: Sequence[str] = ("python3", "python")) -> Optional[dict]:
    """What the target's answers are keyed by: its boot id and each interpreter's identity (one short session);
    None where it cannot be read, and then nothing is reused."""
    out = _call(target, IDENTITY, list(dict.fromkeys(interpreters)), timeout=15)
    lines = out.stdout.splitlines()
    if out.returncode != 0 or not lines or len(lines[0].strip()) < 8:
        return None
    return {"boot_id": lines[0].strip(), "interpreters": [ln.strip() for ln in lines[1:]]}


def observe(target: Target, *, only: Optional[Sequence[str]] = None, ttys: Sequence[bool] = (False, True),
            pauses: Sequence[float] = (0.0, 0.5), interpreters: Sequence[str] = ("python3", "python"),
            reuse_s: float = REUSE_S) -> Outcome:
    """`run`, observed once and reused while its key holds (the target, its boot id, the interpreters, the
    trials asked for) and it is younger than `reuse_s`; `cached_at` says when a reused answer was observed."""
    ident = identity(target, interpreters) if reuse_s > 0 else None
    key = None if ident is None else {"target": str(target), **ident, "only": sorted(only) if only else None,
                                      "ttys": [bool(t) for t in ttys], "pauses": [float(p) for p in pauses]}
    hit = cache.lookup(CACHE_KIND, key, reuse_s) if key else None
    if hit:
        try:
            out = Outcome.from_json(hit[0])
            out.identity, out.cached_at = ident, hit[1]
            return out
        except (KeyError, TypeError, ValueError):
            pass  # an entry of another version: observe again
    out = run(target, only=only, ttys=ttys, pauses=pauses)
    out.identity = ident
    if key and not out.error and not out.unreachable and out.left_behind == 0 and out.trials:
        cache.store(CACHE_KIND, key, out.to_json())
    return out


def _watchdog(target: Target, cleanup: str, d: str, tries: int = 2) -> subprocess.Popen:
    """The watchdog's session, seen to run on the target (it says `ready` before it waits) before any trial starts:
    one that never got there (a session refused or an attach that failed, on a busy host) would leave the trials
    of a probe killed with SIGKILL behind, with nobody to clean them up. Started again once; the last one is
    returned either way (a probe that ends normally cleans up in a session of its own where it is gone)."""
    for attempt in range(tries):
        watchdog = subprocess.Popen(transport.wrap(target, ["sh", "-c", "echo ready\ncat >/dev/null\n" + cleanup,
                                                            "sh", d]),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        ready, _, _ = select.select([watchdog.stdout], [], [], 15)
        if ready and os.read(watchdog.stdout.fileno(), 6) == b"ready\n":
            return watchdog
        if attempt + 1 < tries:
            _kill(watchdog)
            watchdog.wait()
    return watchdog


def _clean(target: Target, watchdog: subprocess.Popen, cleanup: str, d: str) -> Optional[int]:
    """Let the watchdog clean up (close its stdin); if it is gone, clean up in a session of our own."""
    out = ""
    try:
        out = watchdog.communicate(timeout=15)[0].decode(errors="replace")  # closes its stdin first
    except (subprocess.TimeoutExpired, OSError, ValueError):
        _kill(watchdog)
        watchdog.wait()
    if "left=" not in out:
        out = _call(target, cleanup, [d], timeout=15).stdout
    left = [ln for ln in out.splitlines() if ln.startswith("left=")]
    return int(left[-1].split("=")[1]) if left else None


def _look(target: Target, res: Outcome, d: str, wait: float = 0.0) -> None:
    """A fresh session, once `wait` (what is left of the margin) has passed: which heartbeats still move, and
    where each log landed."""
    names = [t.name for t in res.trials]
    script = CHECK.format(polls=int(GONE_S / POLL_S), poll=POLL_S)
    out = _call(target, script, [d, f"{wait:.2f}", *names], timeout=15 + wait)
    seen = {}
    for ln in out.stdout.splitlines():
        parts = ln.split()
        if len(parts) == 4 and parts[0] in names:
            kv = dict(p.split("=", 1) for p in parts[1:])
            seen[parts[0]] = kv
    for t in res.trials:
        kv = seen.get(t.name)
        if kv is None:
            continue
        t.survived = kv["now"] != "x" and kv["now"] != kv["first"]
        t.log = kv["log"]


def _best(trials: list[Trial]) -> tuple[Optional[str], bool]:
    """The preferred strategy that survived every variant and returned promptly; else the best without a tty."""
    def clean(ts: list[Trial]) -> bool:
        """Every trial of the list survived, returned promptly and logged where redirected."""
        return bool(ts) and all(t.survived and not t.held and t.log == "log" for t in ts)
    for name in PREFERENCE:
        if clean([t for t in trials if t.strategy.name == name]):
            return name, False
    for name in PREFERENCE:
        if clean([t for t in trials if t.strategy.name == name and not t.tty]):
            return name, True
    return None, False
