"""The remote half of `dfdoctor launch` and `status`: the same recorder and the same rules, on a --target.

The recorder travels to the target's python over stdin and starts itself detached there
(`dfdoctor.launch.remote_run.ship_recorder`), into a run folder beside the job (`<cwd>/.dfdoctor/runs/<id>`
there). The watch's source for it, `TargetSource`, reads that folder through the transport, one short session per
look, and mirrors it into the local run folder, so the watch and `diagnose` work on it exactly as on a local run;
only "is it alive" and the looks at its processes come from the target's agent instead of our /proc, and a look
is read as one taken here is (`launch/reading.py`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor.diagnose import unreaped
from dfdoctor.diagnose.stacks import Stacks
from dfdoctor.launch import remote_run
from dfdoctor.launch.local import RunSource
from dfdoctor.launch.reading import judge
from dfdoctor.watch import settle
from dfdoctor.run import record
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord
from dfdoctor.targets import Target

POLL_S = 0.1  # between looks; each look is itself a session on the target (~0.1-0.4 s)
RETRY_S = 0.3  # one failed look is tried again before the run counts as unreadable


class RemoteRun:
    """A run whose job lives on a target: how to read its folder there into the local copy."""

    def __init__(self, target: Target, remote_dir: str, python: str = "python3") -> None:
        """Nothing is fetched yet."""
        self.target = target
        self.remote_dir = remote_dir
        self.python = python
        self.last: dict[str, Any] = {}

    @classmethod
    def of(cls, run: RunRecord) -> "RemoteRun":
        """The remote handle of a local run folder that names its target."""
        return cls(run.target, run.spec["remote_dir"], run.spec.get("remote_python") or "python3")

    def load(self, run_dir: Path, *, live: bool = False, full: bool = False) -> RunRecord:
        """Fetch the run folder from the target, mirror it here, and read it with the target's liveness."""
        answer = remote_run.fetch(self.target, self.remote_dir, python=self.python, live=live, full=full)
        if "error" in answer:
            time.sleep(RETRY_S)
            answer = remote_run.fetch(self.target, self.remote_dir, python=self.python, live=live, full=full)
        if "error" not in answer:
            record.mirror(run_dir, answer)
        self.last = answer
        facts = {k: answer.get(k) for k in ("recorder_alive", "job_alive", "boot_id", "error", "job_state",
                                            "recorder_state") if k in answer}
        return record.load(run_dir, remote=facts)

    def source(self, run_dir: Path, watch_s: float, *, settle_s: float = settle.SETTLE_S) -> "TargetSource":
        """The watch's source for this run, read into the local copy `run_dir`."""
        return TargetSource(self, run_dir, watch_s, settle_s=settle_s)

    def look(self, run: RunRecord, watched_s: float) -> Optional[LiveFacts]:
        """Examine the live job there: where its output goes, what it writes, the stacks and system calls of
        every process of its tree, looked at twice; read here as a look taken here is (a lock cycle both looks
        show, a wait they prove: `launch/reading.judge`)."""
        from dfdoctor.diagnose.look import samples_of  # start-up: see live_facts
        run = self.load(run.dir, live=True)
        answer = self.last.get("live")
        live = live_facts(answer, watched_s)
        if live is not None and (answer or {}).get("zombie"):
            # it has ended, a zombie nobody reaped there (its agent read the states, as launch/local.unreaped here)
            live.unreaped = unreaped.why((run.recorder or {}).get("pid"), self.last.get("recorder_state"))
        elif live is not None:
            judge(run, live, samples_of((answer or {}).get("samples")))
        return live

    def settle(self, run: RunRecord, state: settle.Settling, deep: bool = True) -> Optional[str]:
        """The settle check on the target (None: settled, or nothing to wait for): torchrun's ranks there as its
        agent saw them, each looked at once, judged by the local rule. A look that fails says nothing (the
        watch goes on with the settle time and the output's rhythm)."""
        if not may_run_torchrun(list(run.spec.get("argv") or [])):
            return None  # a plain `python3 train.py`: no session a second spent on ranks it cannot have
        answer = remote_run.fetch(self.target, self.remote_dir, python=self.python, ranks=True)
        found = answer.get("ranks") if "error" not in answer else None
        if not found:
            return None
        from dfdoctor.diagnose.look import samples_of  # start-up: see live_facts
        samples = samples_of({"procs": found.get("procs") or []})
        return settle.ranks_settled(int(found["agent"]), int(found["want"] or 0), samples, state, None)

    def sample(self, run: RunRecord, watched_s: float) -> Optional[LiveFacts]:
        """A look during the watch: its facts only when they name a wait (the watch goes on otherwise)."""
        live = self.look(run, watched_s)
        return live if live is not None and (live.classified or live.stuck is not None) else None


def may_run_torchrun(argv: list[str]) -> bool:
    """Whether a command can start torchrun's agent: torchrun itself, or a shell or script that may start it."""
    words = " ".join(argv)
    first = os.path.basename(argv[0]) if argv else ""
    return settle.expected_ranks(argv) is not None or "accelerate" in words or \
        first in ("sh", "bash", "dash", "zsh", "env", "srun", "mpirun", "nohup") or first.endswith(".sh")


def live_facts(facts: Optional[dict[str, Any]], watched_s: float) -> Optional[LiveFacts]:
    """The target's answer about a live job as the LiveFacts the rules read (None: it was not alive); its stacks,
    not yet judged."""
    if not facts:
        return None
    # start-up: what a look means (and psutil, beneath it) is imported for a look alone: `status` of a local run
    # imports this module, and imported them all (0.02 of its CPU-seconds, issue 45)
    from dfdoctor.diagnose.look import blocked, idle
    live = LiveFacts(pid=facts["pid"], watched_s=watched_s, python=bool(facts.get("python")),
                     cpu_s=facts.get("cpu_s"))
    live.stacks = [Stacks(s["pid"], s["text"], s.get("tool") or "kernel", s.get("error"))
                   for s in facts.get("stacks") or []]
    live.stdout_targets = [(int(p), int(fd), str(t)) for p, fd, t in facts.get("stdout_targets") or []]
    live.other_logs = [(int(p), str(t), int(size)) for p, t, size in facts.get("other_logs") or []]
    live.buffered = bool(facts.get("buffered")) and not blocked(live) and not idle(live)
    return live


class TargetSource(RunSource):
    """The watch's source for a run on a --target: a RunSource whose record, looks and ranks are read there, by
    the target's agent over the transport (`RemoteRun`), into the local copy of the run folder."""

    poll_s = POLL_S  # between looks; each look is itself a session on the target

    def __init__(self, remote: RemoteRun, run_dir: Path, watch_s: float, *, settle_s: float = settle.SETTLE_S) -> None:
        super().__init__(run_dir, None, watch_s, settle_s=settle_s, sample=remote.sample)
        self.remote = remote
        self.stacks_where = f" on {remote.target}"  # the progress line says where the look is taken

    def load(self) -> RunRecord:
        """The run folder there, mirrored here, with the target's liveness."""
        return self.remote.load(self.run_dir)

    def look(self, run: RunRecord, watched_s: float) -> Optional[LiveFacts]:
        """A look at the live job there."""
        return self.remote.look(run, watched_s)

    def ranks_unsettled(self, run: RunRecord, state: settle.Settling, deep: bool) -> Optional[str]:
        """torchrun's ranks there, as its agent saw them."""
        return self.remote.settle(run, state, deep)

    def settle_is_cheap(self) -> bool:
        """A line that may run torchrun is asked about its ranks in a session there: once a second is enough."""
        return not may_run_torchrun(list((self.run.spec if self.run else {}).get("argv") or []))
