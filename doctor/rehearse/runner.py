"""Run one rehearsal: place the sentinel where the job would run, run the rewritten line as the user's own shell
would (in a terminal of its own), let its session end, look at what the sentinel saw, and remove it all.

Bounded: the whole takes at most `BUDGET_S` (10 s), plus the slack a slow hop earns (twice what placing the
sentinel took, at most `SLACK_MAX_S`: on a loaded machine ssh and pct exec take seconds, and a line still logging
in is not a session held open). Each step is a killable subprocess in its own session; a
hop that hangs (a password prompt, a host-key question) fails at once under BatchMode, or is killed at its
step's deadline and named.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import selectors
import shutil
import signal
import subprocess
import termios
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from dfdoctor import leftovers
from dfdoctor.rehearse import prove, quiet, rewrite, settled, wall
from dfdoctor.rehearse.rewrite import CannotRehearse, Hop, Plan
from dfdoctor.shellquote import join, quote
from dfdoctor.targets import transport
from dfdoctor.targets.target import Target
from dfdoctor.terminal_signals import as_from_a_terminal
from dfdoctor.lazy_re import compile_later

HERE = Path(__file__).resolve().parent
SENTINEL = (HERE / "sentinel.py").read_text()
# without its comments but the first line (the mark of dfdoctor's own scripts, sweep.sh): it travels in the
# arguments of every look, quoted again at each hop
LOOK = "\n".join(ln for i, ln in enumerate((HERE / "look.sh").read_text().splitlines())
                 if i == 0 or not ln.lstrip().startswith("#")) + "\n"
SWEEP = (HERE / "sweep.sh").read_text()
# texts rewrite.py proved plain, each said with what it names there: "d" a device, a pipe or a socket (the line's
# words go there as they would: nothing to rename), "f" anything else
EXPAND = ('for t in "$@"; do eval "f=$t"; k=f; { [ -c "$f" ] || [ -b "$f" ] || [ -p "$f" ] || [ -S "$f" ]; } && k=d; '
          'printf "%s\\0%s\\0" "$k" "$f"; done')
# Run first by the look at the job's place, in the look's own session: the sentinel arrives on the look's stdin,
# up to a line of its own ($3), read by the shell's `read` (which takes no byte past that line: what follows on
# stdin is the runner's word that the line's session ended, for the look). It says which interpreter words ($4)
# exist there (as look.sh does at the end, in the same session) before the line runs: the fix's lines are composed
# from them while the line runs (ahead.py).
PLACE = ('# dfdoctor rehearsal: place the sentinel\n'
         'umask 077; mkdir "$1" || exit 1; got=\n'
         'while IFS= read -r l; do [ "$l" = "$3" ] && got=1 && break; printf "%s\\n" "$l"; done > "$1/sentinel.py"\n'
         '[ -n "$got" ] && printf %s "$2" > "$1/script" || exit 1\n'
         'for w in $4; do echo "==have $w $(command -v "$w" 2>/dev/null)"; done\n'
         'echo ==placed')
BUDGET_S = 10.0
PLACE_S = 6.0  # one session to the job's place: ssh + pct exec take seconds on a loaded machine
RETURN_S = 3.5  # a line whose session has not returned by then (plus slack) is held open: ended as Ctrl-C would
SLACK_MAX_S = 10.0
DRAIN_S = 0.8  # the terminal stays open this long after the shell returned, as a user's window does...
START_DRAIN_S = 0.2  # ...or only this long after the sentinel started (its first words reach the terminal)
SETTLE_S = 0.5  # the margin of the hang-up race: a heartbeat counts once written this long after the session
# ended. Measured (bench/hangup_margin.py): a job the end of its session kills is dead within 0.01 s of it here;
# the rest is for a real network, where a remote sshd learns of a closed connection a round trip later. Where the
# end of the session is seen to have done all it can (settled.py), the margin is not waited for.
NO_START_S = 1.0  # a sentinel not started this long after the line returned, and after the last process the line
# started here was gone, never started (seen: within 0.3 s, on a machine loaded 3 runs a core). While a process of
# the line lives (`ssh -f`'s client still opening its session, a wrapper still on its way to the job) the wait goes
# on: on a machine loaded 10 runs a core `ssh -f` started the job well over a second after the line returned.
QUIET_S = 0.2  # how long the host waits, each time it is asked, for the line's last process there to be gone
LINE_ENV = "DFDOCTOR_RH_LINE"  # in the environment of every process the line starts here: how they are found
LOOK_END_S = 2.0  # what a look keeps of the rehearsal's time for its report and its sweep
LATE_S = 0.5  # after an interruption, the late sweep comes at least this long after the line's last process here
CLEAN_S = 3.0  # how long the line's processes here may take to be gone once killed, at most
PASSES = 50  # passes over /proc at most, while processes of a pass vanish before they are read (`_line_lives`)
TICK_S = 0.05  # how often look.sh reads the sentinel's files while it waits (its `tick`)
TTY_ENV = {"TERM": "xterm"}


@dataclass
class Place:
    """What one look at one place found."""

    where: str
    start: Optional[dict] = None
    end: Optional[dict] = None
    beats: tuple[str, str] = ("none", "none")
    running: Optional[bool] = None  # the sentinel's process ran when the look came (None: not looked)
    have: dict[str, str] = field(default_factory=dict)
    logs: dict[str, tuple[Optional[int], str]] = field(default_factory=dict)  # renamed path -> (size, head)
    error: str = ""
    swept: bool = False  # sweep.sh ran there after the look
    walls: list[str] = field(default_factory=list)  # what sweep.sh said of the second walls there (wall.py)


@dataclass
class Rehearsal:
    """Everything one rehearsal saw."""

    line: str
    plan: Optional[Plan] = None
    unobservable: str = ""  # why nothing could be observed (a hop unreachable, a line not rewritable)
    output: str = ""  # what the user's terminal would have shown
    returncode: Optional[int] = None
    held: bool = False  # the session did not return by itself
    returned_s: Optional[float] = None
    returned_at: Optional[float] = None  # when the line's shell returned (time.monotonic())
    ended_at: Optional[float] = None  # when the line's terminal hung up (time.monotonic())
    slack: float = 0.0  # extra patience earned by a slow hop: twice what placing the sentinel took
    places: list[Place] = field(default_factory=list)
    seconds: float = 0.0
    left_behind: list[str] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)  # what the last sweep still found to kill or remove
    wall: str = ""  # what the second wall covered at each place, or why there was none (wall.py)
    unstarted_alive: bool = False  # the sentinel had not started by the deadline while the line's processes ran
    quiet_at: Optional[float] = None  # when nothing of the line was seen left, here or at its host (quiet.py)
    hangup: str = ""  # why the terminal hung up when it did, the sentinel having started
    settled_at: Optional[float] = None  # when the end of the session was seen to have done all it can (settled.py)
    ran: bool = False  # the line's own shell was started (or may have been: its Popen was interrupted)
    swept_late: list[str] = field(default_factory=list)  # what the late sweep after an interruption still found

    @property
    def budget(self) -> float:
        """The most this rehearsal may take."""
        return BUDGET_S + self.slack

    @property
    def job_place(self) -> Optional[Place]:
        """The look at the place where the sentinel was put."""
        return self.places[0] if self.places else None

    @property
    def started(self) -> bool:
        """Whether the sentinel ran at all."""
        return bool(self.job_place and self.job_place.start)

    @property
    def alive(self) -> bool:
        """Whether the sentinel still beat after the session ended."""
        p = self.job_place
        if not (p and p.start) or p.end:
            return False
        return bool(p.running) or (p.beats[0] != p.beats[1] and "none" not in p.beats)


def rehearse(line: str, *, cwd: Optional[str] = None, launcher: Optional[str] = None,
             launcher_text: Optional[str] = None, tag: Optional[str] = None,
             planned: Optional[Callable[[Plan, Optional[dict]], None]] = None) -> Rehearsal:
    """Rehearse `line` (see the module docstring); never raises for what the line or its hops do. `planned` is
    told the plan once it is made, before anything runs, then again with the interpreter words that exist at the
    job's place once the sentinel is placed there (ahead.Ahead starts the fix's rehearsals beside this one)."""
    began = time.monotonic()
    out = Rehearsal(line)
    tag = tag or uuid.uuid4().hex[:10]
    try:
        plan = rewrite.plan(line, tag, launcher=launcher, launcher_text=launcher_text,
                            expand=lambda chain, texts: _expand(chain, texts, cwd))
    except CannotRehearse as exc:
        out.unobservable = str(exc)
        return out
    unwalled = wall.unwalled(plan)
    if unwalled:
        out.unobservable = (f"{unwalled} to hold what the reading of the line may miss, and the line hides code: "
                            f"{plan.hides[0]}")
        return out
    out.plan = plan
    job = plan.job
    assert job is not None
    if planned is not None:
        planned(plan, None)
    sweeps = _sweeps(plan)
    every = dict(sweeps)  # the late sweep's places, after an interruption: all of them, also those a look swept
    interrupted = False
    registered = leftovers.register(plan.mark, [_session(chain, words) for chain, words in sweeps.items()],
                                    cwd)  # run by the parent if this worker dies before it cleaned up
    previous = _interruptible()
    try:
        started = _Started()
        placing = time.monotonic()
        # they wait, at each place, for the sentinel and the end; the job's places the sentinel first
        looks = _start_looks(plan, cwd, started, sweeps)
        try:
            if not looks[0].placed.wait(PLACE_S) or not looks[0].placed_ok:
                out.unobservable = _unreachable(job.chain, _abandon(looks))
                looks = []  # each swept its place; the `finally` below sweeps every place again, in its own sessions
                return out
            out.slack = min(SLACK_MAX_S, 2 * (time.monotonic() - placing))
            if planned is not None:
                planned(plan, dict(looks[0].have))
            _run_line(out, plan.walled_line or plan.line, cwd, started, _watcher(plan, looks))
        finally:
            for chain in _finish_looks(out, looks, started, deadline=began + out.budget) if looks else ():
                sweeps.pop(chain)  # swept by its look
    except BaseException:
        interrupted = True  # Ctrl-C, SIGTERM: the line was cut off wherever it was
        raise
    finally:
        # Ctrl-C, SIGTERM, a hop that failed, a place no look went to: nothing of it stays (REHEARSAL.md)
        said = _sweep(sweeps, cwd)
        leftovers.done(registered)
        if interrupted and out.ran:
            out.swept_late = _sweep_late(plan.tag, every, cwd, wait=out.slack / 2)
        _restore(previous)
        out.swept = _swept(said)
        walls = [*(w for place in out.places for w in place.walls),
                 *(ln[len("==wall "):] for text in said for ln in text.splitlines() if ln.startswith("==wall "))]
        stood = dict(w.partition(" ")[::2] for w in walls)
        out.wall = wall.evidence(plan, stood)
        # a line that hides code ran nowhere its wall could not stand: not rehearsed there, never a failure seen
        out.unobservable = out.unobservable or wall.refused(plan, stood) or ""
        if out.unstarted_alive and not out.started:  # not seen to start, not seen to stop starting: no verdict
            out.unobservable = out.unobservable or ("the job had not started by the end of the rehearsal's "
                                                    f"{out.budget:.0f} s, while what the line started still ran")
        out.seconds = time.monotonic() - began
    return out


def _sweep_late(tag: str, sweeps: dict[tuple, list[str]], cwd: Optional[str], *, wait: float) -> list[str]:
    """After an interruption, the line was cut off on its way: a session it asked a hop for may start its shell
    after the sweep (an sshd still setting it up: not yet a process of the line there), and that shell would open
    the renamed log in the user's folder. So: every process of the line here is ended and seen gone (nothing asks
    for another session), then, a session's setup time later (`wait`: what placing the sentinel took, LATE_S at
    least), every place is swept again. Returns what that sweep still found to kill or remove."""
    _kill_line(tag)
    until = time.monotonic() + CLEAN_S
    while _line_lives(tag) and time.monotonic() < until:
        time.sleep(TICK_S)
        _kill_line(tag)
    time.sleep(min(PLACE_S, max(LATE_S, wait)))
    return _swept(_sweep(sweeps, cwd))


def _sweep(sweeps: dict[tuple, list[str]], cwd: Optional[str]) -> list[str]:
    """Each place's sweep session (`sweeps`: its chain and argv), side by side: what each said."""
    with ThreadPoolExecutor(max_workers=max(1, len(sweeps))) as pool:
        return list(pool.map(lambda item: leftovers.run_quietly(_session(*item), cwd), sweeps.items()))


def _swept(said: list[str]) -> list[str]:
    """What the sweeps killed or removed, their lines as they said them."""
    return [ln for text in said for ln in text.splitlines() if ln.startswith(("==killed", "==removed"))]


def _kill_line(tag: str) -> None:
    """SIGKILL to every process the line started on this machine (its environment carries LINE_ENV=tag)."""
    mark = f"\0{LINE_ENV}={tag}\0".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if mark in b"\0" + f.read() + b"\0":
                    os.kill(int(entry.name), signal.SIGKILL)
        except OSError:
            continue


def _session(chain: tuple[Hop, ...], argv: list[str]) -> list[str]:
    """The local argv of one of dfdoctor's own sessions (placing, looking, sweeping, expanding) at the place
    `chain` reaches: over the run's shared ssh connection to the first hop when one is open for that very
    destination (transport.connected, the check run's ControlMaster), so that it costs no ssh login; ssh falls
    back to a login of its own when the master is gone. The line itself is never multiplexed: it logs in as the
    user's does, and its session's end is what the rehearsal observes."""
    words = rewrite.session_argv(chain, argv)
    socket = _shared_socket(chain[0]) if chain else None
    return [words[0], "-o", f"ControlPath={socket}", *words[1:]] if socket else words


def _shared_socket(hop: Hop) -> Optional[str]:
    """The open ControlMaster socket of this run for an ssh hop's destination, if the hop adds nothing but a
    user and a port to it (any other option of the user's may reach elsewhere or otherwise: it logs in itself)."""
    ours = ["ssh", *rewrite.ssh_extra(), "-T"]
    if hop.kind != "ssh" or list(hop.argv[:len(ours)]) != ours:
        return None
    opts, dest = list(hop.argv[len(ours):-1]), hop.argv[-1]
    user, _, host = dest.rpartition("@")
    port = None
    while opts:
        opt = opts.pop(0)
        if opt == "-F" and opts and opts[0] == os.environ.get(rewrite.SSH_CONFIG_ENV):
            opts.pop(0)  # the config dfdoctor's own ssh reads (a printed fix names it)
            continue
        if opt in ("-p", "-l") and opts:
            value = opts.pop(0)
        elif opt[:2] in ("-p", "-l") and len(opt) > 2:
            opt, value = opt[:2], opt[2:]
        else:
            return None
        if opt == "-l":
            if user and user != value:
                return None  # which of the two ssh takes is its own business
            user = value
        elif value.isascii() and value.isdigit():
            port = int(value)
        else:
            return None
    path = transport.control_path(Target(kind="ssh", host=host, user=user or None, port=port))
    return path if path and os.path.exists(path) else None


def _sweeps(plan: Plan) -> dict[tuple, list[str]]:
    """The words that remove what the rehearsal made, for each place it made something (sweep.sh)."""
    places: dict[tuple, list[str]] = {plan.job.chain: []} if plan.job else {}
    for chain in [()] * (wall.why_not_here() is None) + plan.walls:
        places.setdefault(chain, [])  # the second wall's upper layers there (wall.py)
    for chain, _ in plan.multiplexers:
        places.setdefault(chain, [])
    for log in plan.logs:
        places.setdefault(log.chain, []).extend(["~" if log.in_home else (log.cwd or ""), log.renamed[
            :-len(plan.suffix)] if log.renamed.endswith(plan.suffix) else log.renamed])
    return {chain: ["sh", "-c", SWEEP, "sh", plan.tag, *files] for chain, files in places.items()}


def _interruptible():
    """SIGTERM ends a rehearsal the way Ctrl-C does (its `finally` cleans up); only the main thread can say so."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    return signal.signal(signal.SIGTERM, stop)


def _restore(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _expand(chain: tuple[Hop, ...], texts: list[str], cwd: Optional[str]) -> list[str]:
    """What each text (a redirect target of plain words and variables, proved so by rewrite.py) is at that hop,
    by the shell of a session there; CannotRehearse when it cannot be asked."""
    p = _run(_session(chain, ["sh", "-c", EXPAND, "sh", *texts]), timeout=PLACE_S, cwd=cwd)
    said = p.stdout.split("\0")[:-1]
    values = [rewrite.Device(v) if k == "d" else v for k, v in zip(said[::2], said[1::2])]
    if p.returncode != 0 or len(said) != 2 * len(texts):
        raise CannotRehearse(f"could not expand {', '.join(texts)} where the line writes it: "
                             f"{(p.stderr or '').strip()[-200:] or f'exit status {p.returncode}'}")
    return values


def _unreachable(chain: tuple[Hop, ...], p: subprocess.CompletedProcess) -> str:
    """Why the job's place could not be reached, in the words of the hop that failed."""
    said = (p.stderr or p.stdout or "").strip().splitlines()
    words = "; ".join(ln.strip() for ln in said[-2:] if ln.strip())
    where = chain[-1].where if chain else "your machine"
    if p.returncode == -9:
        return (f"reaching {where} did not finish within {PLACE_S:.0f} s (a hop that is slow, hangs, or waits for "
                "input)")
    return f"could not reach {where} to place the sentinel: {words or f'exit status {p.returncode}'}"


def _run(argv: list[str], *, timeout: float, stdin: bytes = b"", cwd: Optional[str] = None
         ) -> subprocess.CompletedProcess:
    """One of dfdoctor's own sessions: no tty, its own process group, killed at the deadline."""
    began = time.monotonic()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True, cwd=cwd)
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: {exc.strerror or exc}")
    try:
        so, se = p.communicate(stdin, timeout=max(0.5, timeout))
    except subprocess.TimeoutExpired:
        _killpg(p.pid)
        so, se = p.communicate()
        p.returncode = -9
    done = subprocess.CompletedProcess(argv, p.returncode, so.decode("utf-8", "surrogateescape"),
                                   se.decode("utf-8", "surrogateescape"))
    done.duration = time.monotonic() - began  # type: ignore[attr-defined]
    return done


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _shell() -> str:
    """The user's kind of shell: bash where there is one (a terminal's usual shell), else sh."""
    return shutil.which("bash") or "/bin/sh"


# The user's own terminal outlives the line: a leader shell runs the line, says when it returned, and keeps the
# terminal open a moment (late words of a background job show there) before it exits and the terminal hangs up.
# Its pause is the `sleep` it execs: the runner ends it DRAIN_S after the return, or early, once the sentinel has
# started (START_DRAIN_S), or later, while the sentinel has not started and a process of the line still runs (a
# job on its way: under load a python took over DRAIN_S to start, and the hang-up killed it before it ran).
LEADER = '"$0" -c "$1"; rc=$?; printf "\\n%s %s\\n" "$2" "$rc"; exec sleep "$3"'


class _Started(threading.Event):
    """Set when a look saw the sentinel start; `at` says when (time.monotonic())."""

    at: float = 0.0


def _clean_env(tag: str = "") -> dict[str, str]:
    """The environment the line's shell starts with: the user's, without the files a non-interactive shell would
    source behind the reader's back (BASH_ENV, ENV) and the options bash would import (REHEARSAL.md); LINE_ENV
    marks what the line starts (`_line_lives`)."""
    env = {k: v for k, v in os.environ.items() if k not in prove.CODE_VARS and not k.startswith("BASH_FUNC_")}
    return {**env, **TTY_ENV, **({LINE_ENV: tag} if tag else {})}


def _line_lives(tag: str, but: int = 0) -> bool:
    """Whether a process the line started on this machine still runs (its environment carries LINE_ENV=tag): a
    daemon that left the line's session (`ssh -f`, `setsid`) is found too. One pass over /proc is no snapshot: a
    process of the line may fork and exit while it is read (its child's pid was not listed yet, and it was gone, a
    zombie, or on its way out, when read: `_wordless`). So, as look.sh's `lives`, the passes go on over the pids
    that appeared since the last, until every one of a pass was read alive: what runs then was read, with the
    environment it has had since its fork. One read in the middle of an exec (its environment not in place yet) is
    read again in the next pass, as it will be in a moment. Processes that keep forking past PASSES passes, or one
    still in its exec then, are not known: alive."""
    mark = f"\0{LINE_ENV}={tag}\0".encode()
    seen = {str(but)}
    again: list[str] = []
    for n in range(PASSES):
        fresh = [e.name for e in os.scandir("/proc") if e.name.isdigit() and e.name not in seen]
        seen.update(fresh)
        if not fresh and not again:
            return False
        vanished, fresh, again = False, fresh + again, []
        for pid in fresh:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read()
            except PermissionError:
                continue  # another user's: not the line's
            except OSError:
                vanished = True  # gone before it was read: it may have forked first
                continue
            if mark in b"\0" + env + b"\0":
                return True
            if not env:
                what = _wordless(pid)
                vanished = vanished or what == "gone"
                if what == "again":
                    again.append(pid)
        if again:
            time.sleep(EXEC_S * min(n + 1, 8))  # the exec goes on meanwhile (under load it waits for a core)
        elif not vanished:
            return False
    return True


PF_EXITING = 0x4  # /proc/PID/stat's flags (its 9th field): the process is on its way out (it forks no more)
PF_KTHREAD = 0x200000  # ...: a kernel thread
EXEC_S = 0.001  # the first pause before an exec read in its middle is read again, then longer, up to 8 times it
# (0.37 s over PASSES passes in all): an exec read empty here was done 0.03 ms later (median), 15 ms at the most of
# 200 at load 10 on 2 cores


def _wordless(pid: str) -> str:
    """What a process whose environment read empty is, by its stat read after: "gone" (a zombie, no longer there,
    or on its way out: it may have forked before, and its child not be listed yet), "again" (in an exec: read it
    again), or "" (a kernel thread, or a process whose environment is empty: not the line's).

    Here (Linux 6.18) a process without memory (a kernel thread, a zombie, one on its way out past letting go of
    it) cannot have its environment opened at all (ESRCH: `_line_lives` counts it gone). An empty read is one
    that straddled the loss of the memory, or a process in an exec, or an empty environment:
    - on its way out, opened before and read after: state still R, and PF_EXITING set (it is set as the exit
      begins, before the memory goes). Round 26: a forking line so read was taken for ended once in 100 reads
      under load; a 100 MB process caught so here 20 of 20 times showed PF_EXITING.
    - in an exec: the old image's memory goes (a straddling read is empty), and the new one's environment reads
      empty until the exec has laid out its words: its bounds (stat's fields 50 and 51) read 0, then equal while
      the kernel walks the strings, and only then is the end of its code (field 27) set (a busybox sh execing
      itself: 18% of its reads empty; of 411 with the bounds equal, all had the end of its code still 0). It lives
      on with the environment it execs with, marked or not: read again; taken for gone it would not be (the next
      pass reads only new pids), nor for a kernel thread as before.
    So only a process whose code is in place and whose environment's bounds are equal has an empty environment."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            after = f.read().rpartition(b") ")[2].split()  # after[0] is field 3
        state, flags, end_code = after[0], int(after[6]), int(after[24])
        env_start, env_end = int(after[47]), int(after[48])
    except (OSError, IndexError, ValueError):
        return "gone"
    if flags & PF_KTHREAD:
        return ""
    if state in (b"Z", b"X") or flags & PF_EXITING:
        return "gone"
    return "" if end_code and env_start == env_end else "again"


def _await_start(out: Rehearsal, started: _Started, until: float) -> Optional[float]:
    """Wait, after the line's session ended, while the sentinel has not started and a process of the line still
    runs here (it may yet start the job: a fixed wait said "never started" of `ssh -f` on a loaded machine).
    Returns when the last of them was seen gone (None: none was left), or `until` if one still runs then."""
    tag = out.plan.tag if out.plan else ""
    if not tag or started.is_set() or not _line_lives(tag):
        return None
    while not started.wait(TICK_S):
        if not _line_lives(tag):
            return time.monotonic()
        if time.monotonic() >= until:
            out.unstarted_alive = True
            return until
    return None


def _run_line(out: Rehearsal, line: str, cwd: Optional[str], started: Optional[_Started] = None,
              watcher: Optional["_Look"] = None) -> None:
    """Run the rewritten line in a shell that has a terminal of its own, as a user's does; when the line is done
    (or held open past RETURN_S, then ended as Ctrl-C and closing the window would), the terminal hangs up: DRAIN_S
    after the line returned, or START_DRAIN_S after the sentinel started if that came first, or as soon as nothing
    of the line is left anywhere (`watcher`, the look at its host: quiet.py)."""
    master, slave = pty.openpty()
    began = time.monotonic()
    marker = f"==dfdoctor-returned-{uuid.uuid4().hex[:8]}"

    # in the child: a new session whose controlling terminal is the pty, with a terminal's signal dispositions
    # (dfdoctor under `nohup` or in a script's background would pass on SIGHUP, SIGINT ignored: terminal_signals)
    def controlling() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        leader = ["sh", "-c", LEADER, _shell(), line, marker, str(DRAIN_S + RETURN_S + out.slack)]
        if out.plan is not None and wall.why_not_here() is None:
            leader = wall.argv(out.plan, leader)  # the same process, in a mount namespace of its own
        # said before Popen: an interruption landing as Popen returns leaves the shell started and unseen here
        # (the late sweep finds its processes by their environment and sweeps what they may still open)
        out.ran = True
        proc = subprocess.Popen(leader, stdin=slave,
                                stdout=slave, stderr=slave, cwd=cwd, start_new_session=True,
                                preexec_fn=as_from_a_terminal(controlling), env=_clean_env(out.plan.tag if out.plan else ""))
    except OSError as exc:
        out.ran = False
        os.close(master)
        os.close(slave)
        out.output = f"{_shell()}: {exc.strerror or exc}"
        return
    os.close(slave)
    try:
        _read_line(out, proc, master, marker, began, started, watcher)
    except BaseException:
        _killpg(proc.pid)  # interrupted: the line's session goes with it (what left it: runner._sweep_late)
        try:
            os.close(master)
        except OSError:
            pass  # closed already: the terminal had hung up
        try:
            proc.wait(timeout=CLEAN_S)
        except subprocess.TimeoutExpired:
            pass
        raise


def _read_line(out: Rehearsal, proc: subprocess.Popen, master: int, marker: str, began: float,
               started: Optional[_Started], watcher: Optional["_Look"]) -> None:
    """What the line's terminal shows until it hangs up (`_run_line`)."""
    chunks: list[bytes] = []
    sel = selectors.DefaultSelector()
    sel.register(master, selectors.EVENT_READ)
    deadline = began + RETURN_S + out.slack
    while time.monotonic() < deadline and proc.poll() is None or sel.get_map() and proc.poll() is None:
        if time.monotonic() >= deadline:
            break
        for _key, _ in sel.select(timeout=0.05):
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal is gone
                chunk = b""
            if not chunk:
                sel.unregister(master)
                break
            chunks.append(chunk)
            if out.returned_s is None and marker.encode() in b"".join(chunks):
                out.returned_at = time.monotonic()
                out.returned_s = out.returned_at - began
                deadline = time.monotonic() + DRAIN_S + RETURN_S + out.slack + 0.5
        if not sel.get_map():
            break
        if out.returned_s is not None and watcher is not None and watcher.may_ask(out.returned_at + DRAIN_S):
            _ask_quiet(out, watcher, started, proc.pid)
        if out.returned_s is not None and proc.poll() is None and _paused_enough(out, started, proc.pid, watcher):
            _kill(proc.pid)  # the leader's pause ends: the session leader exits, as when the sleep is over
            deadline = time.monotonic() + 0.5
    sel.close()
    if proc.poll() is None and out.returned_s is None:
        out.held = True
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, then the window closes
    try:
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid)
        proc.wait()
    os.close(master)  # the terminal hangs up: SIGHUP to whatever still has it as its controlling terminal
    out.ended_at = time.monotonic()
    # bytes that are not UTF-8 stay the same bytes (a log's name the shell quotes back is matched against it, S12)
    text = b"".join(chunks).decode("utf-8", "surrogateescape").replace("\r\n", "\n")
    m = re.search(re.escape(marker) + r" (\d+)", text)
    out.returncode = int(m.group(1)) if m else proc.returncode
    out.output = re.sub(r"\n?" + re.escape(marker) + r" \d+\n?", "\n", text).strip("\n")


def _paused_enough(out: Rehearsal, started: Optional[_Started], leader: int,
                   watcher: Optional["_Look"] = None) -> bool:
    """Whether the terminal may hang up now, the line having returned: once the sentinel started, at once where
    no process of the line (other than the leader) runs here (the job runs elsewhere and its session is over: no
    word of it can reach this terminal, and the hang-up reaches nothing of it), else START_DRAIN_S after it
    started; at once where nothing of the line was seen left, here or at its host (no word can reach the terminal,
    no job start, any more); else DRAIN_S after the return, unless a process of the line still runs here."""
    now = time.monotonic()
    if started is not None and started.is_set():
        if out.plan is not None and not _line_lives(out.plan.tag, but=leader):
            out.hangup = "the job started elsewhere, nothing of the line left here"
            return True
        out.hangup = f"{START_DRAIN_S} s after the job started"
        return now >= started.at + START_DRAIN_S
    if watcher is not None and watcher.quiet_yes:
        out.quiet_at = out.quiet_at or now
        return True
    if now < (out.returned_at or now) + DRAIN_S:
        return False
    return out.plan is None or not _line_lives(out.plan.tag, but=leader)


def _watcher(plan: Plan, looks: list["_Look"]) -> Optional["_Look"]:
    """The look that can say whether a process of the line still runs away from this machine (quiet.py)."""
    chain = quiet.host(plan)
    return next((look for look in looks if chain and look.chain == chain and look.started is None), None)


def _ask_quiet(out: Rehearsal, watcher: "_Look", started: Optional[_Started], leader: int) -> None:
    """Once the line returned without the sentinel started and nothing of it is left here, ask its host whether
    anything of it is left there, waited for there QUIET_S at most each time: asked again while the terminal's
    pause lasts, a question no longer than that keeps the look there from its end (a job still starting)."""
    if (started is not None and started.is_set()) or out.plan is None or _line_lives(out.plan.tag, but=leader):
        return
    watcher.ask_quiet(_ticks(QUIET_S))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Look:
    """One look session (look.sh at one place), started before the line: it says when the sentinel started,
    and looks once told that the line's session ended."""

    def __init__(self, chain: tuple, where: str, argv: list[str], cwd: Optional[str], started: Optional[_Started],
                 first: bytes = b""):
        self.chain, self.where, self.argv, self.started = chain, where, argv, started
        self.out: list[bytes] = []
        self.err = b""
        self.proc: Optional[subprocess.Popen] = None
        self.placed = threading.Event()  # set once it said `==placed`, or ended without saying it
        self.placed_ok = False
        self.asking = False  # a question whether anything of the line is left at its place is out (look.sh's quiet)
        self.quiet_yes = False  # its answer was: nothing
        self.answered = threading.Event()  # set once every `quiet` question asked has its answer (in order)
        self.questions = self.answers = 0
        self.start: dict = {}  # what the sentinel said of itself, as its `==started` line carried it
        self.ended = False
        self.have: dict[str, str] = {}  # the interpreter words PLACE found there, before `==placed`
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True, cwd=cwd)
        except OSError as exc:
            self.err = f"{argv[0]}: {exc.strerror or exc}".encode()
            self.placed.set()
            return
        if first:  # the sentinel, for PLACE: a pipe's buffer holds it, so this does not wait for the far end
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(first)
                self.proc.stdin.flush()
            except OSError:
                pass  # it ended already: what it said is read
        self.readers = [threading.Thread(target=self._read_out, daemon=True),
                        threading.Thread(target=self._read_err, daemon=True)]
        for t in self.readers:
            t.start()

    def _read_out(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.out.append(raw)
            if raw.startswith(b"==have ") and not self.placed.is_set():
                word, _, path = raw[len(b"==have "):].decode(errors="replace").partition(" ")
                self.have[word] = path.strip()
            if raw.startswith(b"==placed"):
                self.placed_ok = True
                self.placed.set()
            if raw.startswith(b"==started") and self.started is not None and not self.started.is_set():
                try:
                    self.start = json.loads(raw[len(b"==started"):].strip() or b"{}")
                except ValueError:
                    self.start = {}
                self.started.at = time.monotonic()
                self.started.set()
            if raw.startswith(b"==quiet "):
                self.answers += 1
                self.quiet_yes = raw.split()[-1] == b"yes"
                self.asking = self.answers < self.questions
                if not self.asking:
                    self.answered.set()  # the answer to the last question (an earlier one's may come after it's asked)
        self.placed.set()
        self.ended = True

    def _read_err(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def may_ask(self, until: float) -> bool:
        """Whether to ask (again) if anything of the line is left here: no question out, none answered "nothing",
        the look still there, and before `until`."""
        return not (self.asking or self.quiet_yes or self.ended) and time.monotonic() < until

    def ask_quiet(self, ticks: int, but: Optional[int] = None) -> None:
        """Ask whether a process of the line still runs at this place, waited for up to `ticks` there (its answer
        sets `quiet_yes`; look.sh's `quiet`); `but`: the sentinel's pid in its container, left out."""
        self.asking, self.quiet_yes = True, False
        self.answered.clear()
        self.questions += 1
        try:
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write(f"quiet {ticks}{'' if but is None else f' {int(but)}'}\n".encode())
            self.proc.stdin.flush()
        except (OSError, AssertionError):
            self.ended = True  # it ended already: no answer, the fixed wait stays

    def finish(self, told: str, timeout: float) -> subprocess.CompletedProcess:
        """Tell it the session ended (`told`: look.sh's two tick counts), and read what it found."""
        if self.proc is None:
            return subprocess.CompletedProcess(self.argv, 127, "", self.err.decode(errors="replace"))
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(told.encode())
            self.proc.stdin.close()
        except OSError:
            pass  # it ended already (an unreachable hop): what it said is read below
        try:
            self.proc.wait(timeout=max(0.5, timeout))
        except subprocess.TimeoutExpired:
            _killpg(self.proc.pid)
            self.proc.wait()
            self.proc.returncode = -9
        for t in self.readers:
            t.join(timeout=2)
        return subprocess.CompletedProcess(self.argv, self.proc.returncode, b"".join(self.out).decode(errors="replace"),
                                           self.err.decode(errors="replace"))


def _start_looks(plan: Plan, cwd: Optional[str], started: _Started, sweeps: dict[tuple, list[str]]) -> list[_Look]:
    """A look at every place the rehearsal touches: the job's (first), each one a redirect wrote at, and each
    other remote place it must sweep (a second wall's layers, a multiplexer's server); the sweep of each place runs
    in the same session, after its look, so that no place needs a login of its own once the line is done."""
    job = plan.job
    assert job is not None
    places: dict[tuple, dict] = {job.chain: {"folder": plan.folder, "logs": [], "where": job.where}}
    for log in plan.logs:
        if log.dynamic or log.in_home:
            continue
        places.setdefault(log.chain, {"folder": "", "logs": [], "where": log.where})["logs"].append(log)
    for chain in sweeps:
        if chain:  # this machine's sweep needs no session: it runs after the looks
            places.setdefault(chain, {"folder": "", "logs": [], "where": chain[-1].where})
    words = " ".join(dict.fromkeys([job.interpreter, "python3", "python"]))
    looks = []
    for chain, what in places.items():
        args = [what["folder"], words]
        for log in what["logs"]:
            args += [log.cwd or "", log.renamed]
        # the look carries the rehearsal's own files out of the second wall once the line's session ended (its
        # wait): DFDOCTOR_RH_SURFACE, read by look.sh
        both = (f"DFDOCTOR_RH_SURFACE={quote(wall.SURFACE)} DFDOCTOR_RH_TAG={plan.tag} sh -c {quote(LOOK)} sh "
                f"{join(args)}; {join(sweeps[chain])}")
        first = b""
        if what["folder"]:  # the job's place: its session places the sentinel first (no login of its own)
            end = f"==end of the sentinel {plan.tag}"
            script = job.script if job.script_is_file else ""
            both = f"sh -c {quote(PLACE)} sh {join([plan.folder, script or '', end, words])} && {both}"
            first = SENTINEL.rstrip("\n").encode() + f"\n{end}\n".encode()
        looks.append(_Look(chain, what["where"], _session(chain, ["sh", "-c", both]), cwd,
                           started if what["folder"] else None, first))
    return looks


def _abandon(looks: list[_Look]) -> subprocess.CompletedProcess:
    """The sentinel could not be placed: end every look at once (each sweeps its place on the way out), and
    say what the job's look said."""
    late = not looks[0].placed.is_set()
    for look in looks if late else ():  # still on its way after PLACE_S: a hop that is slow, hangs, or waits for
        if look.proc is not None:       # input; the others go the same way (the `finally` sweeps every place)
            _killpg(look.proc.pid)
    with ThreadPoolExecutor(max_workers=len(looks)) as pool:
        done = list(pool.map(lambda look: look.finish("0 0\n", 2.5), looks))
    if late:
        done[0].returncode = -9
    return done[0]


def _ticks(seconds: float) -> int:
    return max(0, int(seconds / TICK_S + 0.999))


def _finish_looks(out: Rehearsal, looks: list[_Look], started: _Started, *, deadline: float) -> list[tuple]:
    """Tell every look that the line's session ended, with what is left of the margin of the hang-up race and
    of the wait for a sentinel that has not started (counted from the line's return, or from when its last process
    here was gone: their own connection time already counts), and read them. Returns the places their sessions
    swept."""
    gone = _await_start(out, started, deadline - 2 * NO_START_S) if out.returned_at is not None else None
    now = time.monotonic()
    ended = out.ended_at or now
    since = max(out.returned_at or ended, gone or 0.0)
    # nothing of the line was left anywhere, the sentinel not started: no wait for it, only one look
    no_start = 0.0 if out.quiet_at is not None else NO_START_S - (now - since)
    settle = SETTLE_S - (now - ended)
    if settle > 0 and _hangup_seen(out, looks, started, until=ended + SETTLE_S):
        settle = 0.0  # the hang-up's effect was seen at every place it could reach the job: no margin left to wait
        out.settled_at = time.monotonic()
    # past the wait for a sentinel not started, the job's look waits on while a process of the line runs there (a
    # python still starting on a loaded machine: "never got to run" was said of the seed's working fix), until the
    # rehearsal's time is nearly out (what is left of it then reads and sweeps)
    told = f"{_ticks(settle)} {_ticks(no_start)} {_ticks(deadline - time.monotonic() - LOOK_END_S)}\n"
    with ThreadPoolExecutor(max_workers=max(1, len(looks))) as pool:
        out.places = list(pool.map(lambda look: _read_look(look.where, look.finish(
            told, max(2.5, deadline - time.monotonic()))), looks))
    for place in out.places:
        if place.error:
            out.left_behind.append(f"{place.where}: {place.error}")
    return [look.chain for look, place in zip(looks, out.places) if place.swept]


def _hangup_seen(out: Rehearsal, looks: list[_Look], started: _Started, *, until: float) -> bool:
    """Whether the end of the line's session was seen to have done all it can to the started sentinel before
    `until` (the end of the fixed margin): nothing of the line left here, nor at its host but the sentinel itself,
    which says it is out of reach of anything else (settled.py)."""
    watcher = _watcher(out.plan, looks) if out.plan is not None else None
    pid = settled.sentinel_pid(looks[0].start) if looks else None
    if watcher is None or pid is None or not started.is_set() or _line_lives(out.plan.tag):
        return False
    watcher.ask_quiet(_ticks(until - time.monotonic()), but=pid)
    return watcher.answered.wait(max(0.0, until - time.monotonic()) + TICK_S) and watcher.quiet_yes


_SECTION = compile_later(r"^==(\w+) ?(.*)$")


def _read_look(where: str, p: subprocess.CompletedProcess) -> Place:
    """Parse look.sh's sections."""
    place = Place(where)
    lines = p.stdout.splitlines()
    i = 0
    while i < len(lines):
        m = _SECTION.match(lines[i])
        i += 1
        if not m:
            continue
        name, rest = m.groups()
        if name in ("start", "end"):
            body = lines[i] if i < len(lines) else ""
            try:
                setattr(place, name, json.loads(body) if body.strip() else None)
            except ValueError:
                pass
        elif name == "beats":
            parts = rest.split()
            place.beats = (parts[0], parts[1]) if len(parts) == 2 else ("none", "none")
        elif name == "wall":
            place.walls.append(rest.strip())
        elif name == "alive":
            place.running = rest.strip() == "yes"
        elif name == "have":
            word, _, path = rest.partition(" ")
            place.have[word] = path.strip()
        elif name == "log":
            path, _, size = rest.rpartition(" ")
            if size == "missing":
                place.logs.setdefault(path, (None, ""))  # the same file, already read through the sentinel's fd
            else:
                body = []
                while i < len(lines) and not _SECTION.match(lines[i]):
                    body.append(lines[i])
                    i += 1
                place.logs[path] = (int(size) if size.isdigit() else 0, "\n".join(body))
    place.swept = "==swept" in p.stdout
    if "==done" not in p.stdout:
        place.error = (p.stderr.strip().splitlines() or [f"the look exited {p.returncode}"])[-1]
    return place
