"""The remote half of `dfdoctor launch` and `status`: the same recorder and the same rules, on a --target.

The recorder travels to the target's python over stdin and starts itself detached there
(`dfdoctor.launch.remote_run.ship_recorder`), into a run folder beside the job (`<cwd>/.dfdoctor/runs/<id>`
there). The watcher reads that folder through the transport, one short session per look, and mirrors it
into the local run folder, so `launch.watch` and `diagnose` work on it exactly as on a local run; only
"is it alive" comes from the target's /proc instead of ours.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor.diagnose.stacks import Stacks
from dfdoctor.diagnose.verdict import LiveFacts
from dfdoctor.launch import remote_run, rundir
from dfdoctor.launch.local import _blocked, _cycle, classified_as
from dfdoctor.launch.rundir import RunRecord

POLL_S = 0.1  # between looks; each look is itself a session on the target (~0.1-0.4 s)
RETRY_S = 0.3  # one failed look is tried again before the run counts as unreadable


class RemoteRun:
    """A run whose job lives on a target: how to read its folder there into the local copy."""

    def __init__(self, target: str, remote_dir: str, python: str = "python3") -> None:
        """Nothing is fetched yet."""
        self.target = target
        self.remote_dir = remote_dir
        self.python = python
        self.last: dict[str, Any] = {}

    @classmethod
    def of(cls, run: RunRecord) -> "RemoteRun":
        """The remote handle of a local run folder that names its target."""
        return cls(run.spec["target"], run.spec["remote_dir"], run.spec.get("remote_python") or "python3")

    def load(self, run_dir: Path, *, live: bool = False, full: bool = False) -> RunRecord:
        """Fetch the run folder from the target, mirror it here, and read it with the target's liveness."""
        answer = remote_run.fetch(self.target, self.remote_dir, python=self.python, live=live, full=full)
        if "error" in answer:
            time.sleep(RETRY_S)
            answer = remote_run.fetch(self.target, self.remote_dir, python=self.python, live=live, full=full)
        if "error" not in answer:
            rundir.mirror(run_dir, answer)
        self.last = answer
        facts = {k: answer.get(k) for k in ("recorder_alive", "job_alive", "boot_id", "error") if k in answer}
        return rundir.load(run_dir, remote=facts)

    def look(self, run: RunRecord, watched_s: float) -> Optional[LiveFacts]:
        """Examine the live job there: where its output goes, what it writes, its threads' wait channels."""
        self.load(run.dir, live=True)
        return live_facts(self.last.get("live"), watched_s)


def live_facts(facts: Optional[dict[str, Any]], watched_s: float) -> Optional[LiveFacts]:
    """The target's answer about a live job as the LiveFacts the rules read (None: it was not alive)."""
    if not facts:
        return None
    live = LiveFacts(pid=facts["pid"], watched_s=watched_s, python=bool(facts.get("python")),
                     cpu_s=facts.get("cpu_s"))
    live.stacks = [Stacks(s["pid"], s["text"], s.get("tool") or "kernel", s.get("error"))
                   for s in facts.get("stacks") or []]
    cycle = _cycle("\n\n".join(s.text for s in live.stacks if s.tool == "py-spy"))
    if cycle is not None:
        live.classified, live.cycle_detail = classified_as(cycle), cycle.detail()
    live.stdout_targets = [(int(p), int(fd), str(t)) for p, fd, t in facts.get("stdout_targets") or []]
    live.other_logs = [(int(p), str(t), int(size)) for p, t, size in facts.get("other_logs") or []]
    live.buffered = bool(facts.get("buffered")) and not _blocked(live) and not _idle(live)
    return live


def _idle(live: LiveFacts) -> bool:
    """Without Python stacks, CPU time is what tells a busy job (output sitting in its buffer) from one that
    waits (an import, a lock, a socket): under 5 % of one core over the watch is waiting."""
    if any(s.tool == "py-spy" for s in live.stacks) or live.cpu_s is None or live.watched_s <= 0:
        return False
    return live.cpu_s < 0.05 * live.watched_s
