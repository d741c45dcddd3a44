"""Ways to start a job so that it outlives the session that started it, as shell lines, and which one worked
best on each target (remembered by `persistence.session`, used by `launch --strategy auto`).

Each strategy is a template over three shell words: `{cmd}` (the job, already quoted), `{log}` and `{name}`.
The line runs in the target's own shell (inside the container for pct/lxc/docker targets), in the job's cwd.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from dfdoctor.agent import ship
from dfdoctor.cache import cache_dir, private_dir
from dfdoctor.shellquote import join, quote
from dfdoctor.safefile import write_atomically

@dataclass(frozen=True)
class Strategy:
    """One way to detach a job: a name, its shell line, and what must exist on the target for it."""

    name: str
    template: str
    needs: tuple[str, ...] = ()
    handoff: bool = False  # hands the job to a daemon that was running before the session (survives a kill-all)
    note: str = ""
    words: str = ""  # the strategy for someone who never heard of SIGHUP

    def line(self, argv: Sequence[str], log: str, name: str = "job", python: str = "python3") -> str:
        """The shell line that starts argv this way, logging to `log`."""
        cmd = join(list(argv))
        return self.template.format(cmd=cmd, log=quote(log), name=quote(f"dfdoctor-{name}"),
                                    qcmd=quote(f"{cmd} >>{quote(log)} 2>&1"), python=quote(python),
                                    detach=quote(ship.detach_code()))


STRATEGIES: tuple[Strategy, ...] = (
    Strategy("nohup-setsid-f", "nohup setsid -f {cmd} </dev/null >>{log} 2>&1", ("nohup", "setsid"),
             note="new session, no terminal, every fd redirected: nothing ties it to the session",
             words="started in a session of its own with `nohup setsid -f`, every output sent to the log"),
    Strategy("nohup-setsid-f-wait", "nohup setsid -f {cmd} </dev/null >>{log} 2>&1; sleep 1", ("nohup", "setsid"),
             note="the same, then a pause: lxc-attach with a pty (pct exec under ssh -t) kills the attached "
                  "process group as it returns, which can catch the forked child before its setsid()",
             words="started in a session of its own with `nohup setsid -f`, every output sent to the log, then a one-second pause before the session ends"),
    Strategy("tmux", "tmux new -d -s {name} {qcmd}", ("tmux",), handoff=True,
             note="runs in the tmux server; needs a free pty",
             words="started in a detached tmux session"),
    Strategy("screen", "screen -dmS {name} sh -c {qcmd}", ("screen",), handoff=True,
             words="started in a detached screen session"),
    Strategy("dfdoctor", "{python} -c {detach} {log} {cmd}", ("python",),
             note="what `dfdoctor launch` does: SIGHUP ignored before fork, new session",
             words="started by dfdoctor's own hand-off (the way `dfdoctor launch` starts a job)"),
    Strategy("double-fork", "( {cmd} </dev/null >>{log} 2>&1 & )", note="orphaned at once, but same session",
             words="started in the background from a sub-shell, `( CMD & )`"),
    Strategy("at", "printf '%s\\n' {qcmd} | at now 2>/dev/null", ("at", "atd"), handoff=True,
             note="atd runs it outside the session; starts within a second or so",
             words="handed to the `at` daemon (`at now`)"),
    Strategy("systemd-run", "systemd-run --quiet --collect --unit {name} sh -c {qcmd}", ("systemd",),
             handoff=True, note="only where systemd is PID 1",
             words="handed to systemd (`systemd-run`)"),
    Strategy("setsid-nohup", "setsid nohup {cmd} >>{log} 2>&1 &", ("nohup", "setsid"),
             words="started in the background with `setsid nohup CMD &`"),
    Strategy("nohup", "nohup {cmd} >>{log} 2>&1 &", ("nohup",),
             words="started in the background with `nohup CMD &`"),
    Strategy("nohup-bare", "nohup {cmd} &", ("nohup",), note="no redirects: output to nohup.out or the session",
             words="started with `nohup CMD &` without sending its output to a log"),
    Strategy("amp", "{cmd} >>{log} 2>&1 &", note="plain background job",
             words="started in the background with a plain `CMD &`"),
)
BY_NAME = {s.name: s for s in STRATEGIES}
# Best first, when several survive everywhere. The pause comes first: without it, lxc-attach with a terminal
# can end the job before its setsid() (docs/targets.md), so which of the two "survived" would change from run
# to run on a loaded machine; with the pause first the answer is the same every time.
PREFERENCE = ["nohup-setsid-f-wait", *(s.name for s in STRATEGIES if s.name != "nohup-setsid-f-wait")]


DEFAULT = "dfdoctor"  # `launch --target`'s own way when nothing else was asked or found: the recorder's detach


def for_launch(target: str, asked: Optional[str] = None) -> str:
    """The strategy `launch --target` starts its recorder with: the one asked for, or (`auto`) the one
    `persistence.session` found best for the target, else the recorder's own detach."""
    return asked if asked and asked != "auto" else (best_for(target) or DEFAULT)


def state_file() -> Path:
    """Where the best strategy per target is remembered."""
    return cache_dir() / "strategies.json"


def remember(target: str, strategy: Optional[str], matrix: list[dict]) -> None:
    """Record the best strategy found for `target` (atomically; a broken file is replaced)."""
    path = state_file()
    private_dir(path.parent)
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[target] = {"strategy": strategy, "measured_at": time.time(), "matrix": matrix}
    write_atomically(path, json.dumps(data, indent=1), private=True)


def best_for(target: str) -> Optional[str]:
    """The strategy `persistence.session` found best for `target`, if it ran there."""
    try:
        entry = json.loads(state_file().read_text()).get(target)
    except (OSError, ValueError, AttributeError):
        return None
    return entry.get("strategy") if isinstance(entry, dict) else None
