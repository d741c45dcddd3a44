"""Run a probe script on a target without installing dfdoctor there: dfdoctor's agent (`dfdoctor.agent.ship`) and
the probe's files travel to the target's python over stdin; the agent's probe bootstrap keeps the probe's deadline
itself (stacks at SIGUSR1, then SIGKILL) and kills everything the probe started when it ends or when the
connection drops. The answer comes back on stdout after a marker line.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path
from typing import Any, Optional, Sequence

import dfdoctor.checks.probes as _probes_pkg
from dfdoctor.agent import ship
from dfdoctor.agent.probe_bootstrap import MARK

STACK_GRACE_S = 0.7
SUPPORT = Path(_probes_pkg.__file__).resolve().with_name("_probe_support.py")  # the helpers a probe may import


def argv(python: str) -> list[str]:
    """The command that runs the probe bootstrap under the target's `python` (stdin: `request`)."""
    return ship.stdin_argv(python, "probe")


def _pack(obj: bytes) -> bytes:
    """Compress and base64 one line for the target's stdin."""
    return base64.b64encode(zlib.compress(obj, 9)) + b"\n"


def probe_files(script: Path) -> dict[str, str]:
    """The probe and the sibling modules it imports by name (`_probe_support`, ...); a probe kept elsewhere (a
    test's) that names the probes' helpers gets dfdoctor's own `_probe_support.py`."""
    text = script.read_text()
    files = {script.name: text}
    for sib in [*script.parent.glob("*.py"), SUPPORT]:
        # the substring first: a pattern compiled per sibling was most of a probe's start on a target (0.02-0.06 s
        # of CPU in each check's worker, issue 45), and a name the text does not hold cannot match it
        if sib.name not in files and sib.stem != "__init__" and sib.stem in text and \
                re.search(rf"\b{re.escape(sib.stem)}\b", text):
            files[sib.name] = sib.read_text()
    return files


def request(script: Path, args: Sequence[str], *, timeout: float, env: dict[str, str], cwd: Optional[str],
            python: Optional[str], extra: Optional[dict[str, str]] = None, probe_input: Any = None,
            site: bool = True) -> bytes:
    """What goes down the target's stdin: the agent, then the request (`extra`: more files, by name; the
    probe's own input, which the bootstrap hands over in a file)."""
    return ship.stdin_line("probe") + line(script, args, timeout=timeout, env=env, cwd=cwd, python=python,
                                           extra=extra, probe_input=probe_input, site=site)


def line(script: Path, args: Sequence[str], *, timeout: float, env: dict[str, str], cwd: Optional[str],
         python: Optional[str], extra: Optional[dict[str, str]] = None, probe_input: Any = None,
         site: bool = True) -> bytes:
    """The request alone, the line the bootstrap reads after the agent's (what the relay carries:
    targets/relay.py). Without `site` the probe, one that needs the standard library alone, starts with -S (as
    `probe.run_probe` starts it here); the key is left out otherwise, the request as it always was."""
    req = {"files": {**probe_files(script), **(extra or {})}, "script": script.name, "args": list(args),
           "timeout": timeout, "grace": STACK_GRACE_S, "env": env, "cwd": cwd, "python": python,
           "input": probe_input, **({} if site else {"site": False})}
    return _pack(json.dumps(req).encode())


def split_answer(stdout: str) -> tuple[str, Optional[dict[str, Any]]]:
    """The probe's own stdout and the bootstrap's trailer (rc, timed_out, answer), if it got that far."""
    head, sep, tail = stdout.rpartition("\n" + MARK)
    if not sep:
        return stdout, None
    try:
        return head, json.loads(tail.strip().splitlines()[0])
    except (ValueError, IndexError):
        return head, None
