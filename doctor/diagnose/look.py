"""What one look at a live job means, wherever it was taken: this machine (py-spy and /proc), a target (its
agent's answers) or a Slurm node (the agent run there by srun). The watch of each place hands its looks here;
the reading is one: a compile-lock cycle both samples show, a wait the stacks of every process prove, a main
thread that waits (so a block buffer explains nothing), a job that spends no CPU.
"""

from __future__ import annotations

from typing import Any, Optional

from dfdoctor import causes
from dfdoctor.diagnose import stackclass, stuck
from dfdoctor.diagnose.guardfix import fix_for, is_trainer
from dfdoctor.diagnose.jobstacks import Look, ProcessSample, read_rendezvous
from dfdoctor.diagnose.kernelwait import from_raw
from dfdoctor.diagnose.stacks import Stacks
from dfdoctor.numbers import whole
from dfdoctor.run.live import LiveFacts

# A main thread whose innermost frame is one of these waits (a lock, a join, a socket, a collective): stuck or
# idle, not busy working with its output in a buffer.
BLOCKING_FRAMES = ("acquire", "wait", "join", "_wait_for_tstate_lock", "recv", "recv_into", "accept", "barrier",
                   "init_process_group", "_lazy_init", "get", "lockf", "flock", "connect")
IDLE_CPU_SHARE = 0.05  # under 5 % of one core over the watch: a job without Python stacks waits


def cycle_in(text: str):
    """The compile-lock cycle in a stack dump (py-spy's qualified names or faulthandler's bare ones: the one
    parser reads both), or None."""
    try:
        return stackclass.find_cycle(text)
    except Exception:  # a classifier bug must not cost us the verdict
        return None


def last_stacks(samples: list[ProcessSample]) -> list[Stacks]:
    """The last look at each Python process of a sample: the stacks a lock cycle is read from."""
    return [s.last.stacks for s in samples if s.python and s.last is not None]


def lasting_cycle(seen: list[Stacks], samples: list[ProcessSample]):
    """The compile-lock cycle a look shows, read the same way wherever it was taken (this machine, a target's
    agent): with `samples`, each process looked at twice a second apart, the cycle in their last looks that the
    first looks showed too (one passing through is not stuck); without, the cycle in the one look `seen`."""
    if samples:
        seen = last_stacks(samples)
    cycle = cycle_in("\n\n".join(s.text for s in seen))
    if cycle is not None and samples:
        first = cycle_in("\n\n".join(s.looks[0].stacks.text for s in samples if s.python and s.looks))
        if first is None or first.signature() != cycle.signature():
            return None  # passing through, not stuck: the two looks differ
    return cycle


def classified_as(cycle) -> tuple[str, str]:
    """(cause, headline) of a lock cycle, as LiveFacts.classified holds it."""
    return causes.COMPILE_DEADLOCK, cycle.headline()


def blocked(facts: LiveFacts) -> bool:
    """The main thread waits on a lock, a join, a socket or a collective: stuck, not busy working."""
    for st in facts.stacks:
        main = stackclass.main_thread(st.text)
        if main and main.frames and main.frames[0].func in BLOCKING_FRAMES:
            return True
    return False


def idle(live: LiveFacts) -> bool:
    """Without Python stacks, CPU time is what tells a busy job (output sitting in its buffer) from one that
    waits (an import, a lock, a socket): under IDLE_CPU_SHARE of one core over the watch is waiting."""
    if any(s.tool == "py-spy" for s in live.stacks) or live.cpu_s is None or live.watched_s <= 0:
        return False
    return live.cpu_s < IDLE_CPU_SHARE * live.watched_s


def judge_wait(live: LiveFacts, samples: list[ProcessSample], quiet_s: float, *, local: bool,
               flushed: bool, busy_s: Optional[float] = None) -> None:
    """Name the wait the samples of every process prove (live.stuck), for a job silent past its rhythm
    (`busy_s`: the part of its silence a block buffer can explain, stuck.judge)."""
    if not samples or not live.quiet or live.classified:
        return
    live.stuck, failed = proven_wait(samples, quiet_s, local=local, flushed=flushed, busy_s=busy_s)
    if failed:
        live.notes.append(failed)


def proven_wait(samples: list[ProcessSample], quiet_s: float, *, local: bool, flushed: bool = False,
                busy_s: Optional[float] = None) -> tuple[Optional[stuck.Finding], Optional[str]]:
    """(the wait the samples of every process prove, None: none; the classifier's own failure in words, None:
    it did not fail): one reading for a look here, on a target and on a Slurm node."""
    try:
        return stuck.judge(samples, quiet_s, local=local, flushed=flushed, busy_s=busy_s), None
    except Exception as exc:  # a classifier bug must not cost us the verdict
        return None, f"the stack classifier failed: {type(exc).__name__}: {exc}"


def named_wait(samples: list[ProcessSample], quiet_s: float, *,
               local: bool) -> tuple[Optional[stuck.Finding], Optional[str]]:
    """What the samples of every process name, as a Finding, for a look with no run of ours to note it in (a
    Slurm node's): the lock cycle both samples show (compile-deadlock), else the wait they prove (proven_wait)."""
    cycle = lasting_cycle([], samples)
    if cycle is not None:
        trainer = any(is_trainer(s.cmdline) for s in samples)  # its fix is a switch of its own
        return stuck.Finding("failed", causes.COMPILE_DEADLOCK, cycle.headline(), fix_for(trainer), cycle.detail()), None
    return proven_wait(samples, quiet_s, local=local)


def samples_of(answer: Optional[dict[str, Any]]) -> list[ProcessSample]:
    """An agent's raw looks (a target's, a Slurm node's) as the ProcessSamples dfdoctor.diagnose.stuck reads."""
    if not answer:
        return []
    out = []
    for pr in answer.get("procs") or []:
        if pr.get("zombie"):  # a dead child nobody reaped there: its exit is all it says (as jobstacks.describe)
            out.append(ProcessSample(int(pr["pid"]), pr.get("ppid"), [], False, gone=True, exited=pr.get("exited"),
                                     here=False))
            continue
        env = pr.get("env") or {}
        s = ProcessSample(int(pr["pid"]), pr.get("ppid"), list(pr.get("cmdline") or []), bool(pr.get("python")),
                          rank=whole(env.get("RANK", ""), None) if "LOCAL_RANK" in env else None,
                          local_rank=whole(env.get("LOCAL_RANK", ""), None),
                          world_size=whole(env.get("WORLD_SIZE", ""), None), buffered=bool(pr.get("buffered")),
                          gone=bool(pr.get("gone")), here=False)
        if s.python:  # its store or torchrun's endpoint, as a local look reads a Python process's (the agent
            # sent the named variables and the sockets' other ends; none read: not established)
            read_rendezvous(s, env, lambda tcp=pr.get("tcp"): None if tcp is None else [tuple(c) for c in tcp])
        for lk in pr.get("looks") or []:
            text = lk.get("stack") or ""
            there = dict(answer.get("sources") or {})  # the files as they are where it runs, never read here
            st = Stacks(s.pid, text, "py-spy", sources=there) if text else \
                Stacks(s.pid, "", "kernel", "no Python stack there", sources=there)
            s.looks.append(Look(st, from_raw(lk.get("syscall") or "", lk.get("fds") or {}, answer.get("locks") or ""),
                                lk.get("cpu_s"), lk.get("switches"), lk.get("t"), lk.get("voluntary")))
        out.append(s)
    return out
