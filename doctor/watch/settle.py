"""Settling: when "running" may be said.

A job is running when it has lived past a settle time with its output still growing, and every process it
should have is alive and past its start. For torchrun that means as many ranks as it was asked for, none of
them gone since we first saw it, none still inside init_process_group (checked with one stack sample).

The settle time (default 10 s, never longer than --watch) is how long a job must have been printing (counted
from its first output: importing torch and bringing CUDA up can take 5-10 s before it) when nothing shows that it
is past its start. A job in its loop shows it: one shape of line ("step 120: loss 2.31") printed again and again
with new numbers, LOOP_REPEATS times over LOOP_SPAN_S or more, the last of them among its latest output (the
recorder counts the shapes: dfdoctor.agent.loop_lines). Such a job has imported, built its model and opened its
data, where start-up failures happen (a missing GPU, a data file not found), so it is called running then,
typically 3-4 s after its start. A loop that counts towards a total it will reach within the settle time is a
phase about to end (a warm-up before a compile that may hang), not the job's loop: while it lasts the job is
not called running, even past the settle time. A job with no such line waits out the settle time, so one that
dies in its first seconds is never reported running. For torchrun the time after every rank is past
init_process_group is not shortened: rank 0 can go on printing while another rank dies in its first step.
`--settle 0` says running as soon as the output is steady, faster and riskier.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from dfdoctor.agent.procfs import descendants, psutil_cmdline
from dfdoctor.agent.ranks import nproc as expected_ranks  # one reading of torchrun's line, here and on targets
from dfdoctor.diagnose.look_times import MAX_PROCESSES
from dfdoctor.watch import rhythm

if TYPE_CHECKING:  # start-up: psutil and the stack looks are imported for a job torchrun runs alone (_torchrun)
    from dfdoctor.diagnose.jobstacks import ProcessSample

SETTLE_S = 10.0
LOOP_REPEATS = 5  # one shape of line printed this many times...
LOOP_SPAN_S = 3.0  # ...over at least this long (a table printed at once is a burst, not a loop)
LOOP_SHOWN = 60  # characters of the loop's line shape quoted in the evidence


@dataclass
class Settling:
    """What the settle check remembers between polls: the ranks it has seen (one that goes away is a death)."""

    ranks_seen: dict[int, int] = field(default_factory=dict)  # pid -> rank
    lost: list[str] = field(default_factory=list)  # evidence: ranks that died while we watched
    notes: list[str] = field(default_factory=list)  # evidence for "running"
    since: Optional[float] = None  # wall time every rank was first seen alive and past init_process_group
    absent: int = 0  # ranks torchrun was asked for and does not have, at the last check (a rank that ended)


def in_its_loop(hb: Optional[dict[str, Any]], settle_s: float = SETTLE_S) -> Optional[str]:
    """Evidence, in words, that the job is in its loop and so past its start (None: not shown): the shape of
    line the heartbeat names was printed LOOP_REPEATS times over LOOP_SPAN_S or more, and is still what the
    job prints (a loop that ended, such as shards loaded one by one, is not the job's loop). A loop counting
    towards a total that it reaches within `settle_s` is a phase about to end (a warm-up, then a compile that
    may hang), not the job's loop: the settle time is waited out."""
    hb = hb or {}
    loop = hb.get("loop") or {}
    count, first, last = int(loop.get("count") or 0), loop.get("first_t"), loop.get("last_t")
    if count < LOOP_REPEATS or first is None or last is None or last - first < LOOP_SPAN_S:
        return None
    every = (last - first) / (count - 1)
    if (hb.get("last_output_t") or last) - last > max(rhythm.GROWING_S, rhythm.RHYTHMS * every):
        return None
    if about_to_end(hb, settle_s) is not None:
        return None
    shape = " ".join(str(loop.get("shape") or "").split())
    shape = shape if len(shape) <= LOOP_SHOWN else shape[:LOOP_SHOWN - 3] + "..."
    return f'in its loop: "{shape}" printed {count} times over {last - first:.1f} s'


def ripe_within(hb: Optional[dict[str, Any]], talking_s: float, within_s: float, settle_s: float = SETTLE_S) -> bool:
    """Whether the job, going on at its pace, is past its start within `within_s`: its settle time runs out, or
    its loop, projected that far at the pace its lines show, is the job's loop then (a look may be prepared)."""
    if talking_s + within_s >= settle_s:
        return True
    hb = hb or {}
    loop = hb.get("loop") or {}
    count, first, last = int(loop.get("count") or 0), loop.get("first_t"), loop.get("last_t")
    if count < 2 or first is None or last is None or last <= first:
        return False
    every = (last - first) / (count - 1)
    more = int(within_s / every)
    ahead = dict(loop, count=count + more, last_t=last + more * every)
    return in_its_loop(dict(hb, loop=ahead, last_output_t=last + more * every), settle_s) is not None


def about_to_end(hb: Optional[dict[str, Any]], settle_s: float = SETTLE_S) -> Optional[str]:
    """Words for a loop that counts towards a total it reaches within `settle_s` at the pace its first and
    latest lines show (`target step 260/300`): a phase about to end, after which the job does something else
    (compiles, evaluates, or dies). None when the job's latest loop shows no such end."""
    loop = (hb or {}).get("loop") or {}
    done, of, start = loop.get("done"), loop.get("of"), loop.get("first_done")
    first, last = loop.get("first_t"), loop.get("last_t")
    if not all(isinstance(x, int) for x in (done, of, start)) or done == start or first is None or last is None:
        return None  # no total, or one that did not move: nothing says when it ends
    if done >= of:
        return f"its loop reached its total ({done}/{of})"
    pace = (done - start) / max(last - first, 1e-3)
    left = (of - done) / pace if pace > 0 else float("inf")
    if left >= settle_s:
        return None
    return f"its loop is a phase about to end ({done}/{of}, about {left:.0f} s left)"


def _torchrun(pid: int) -> Optional[tuple[int, int]]:
    """The torchrun agent in the job's tree (its pid) and how many local ranks it was asked for. The tree
    (jobstacks.tree's: the job and its descendants, MAX_PROCESSES of them) and their command lines are read from
    /proc as psutil reads them, where the kernel lists each process's children: psutil and the stack looks are
    imported only for a job that has such an agent (every job seen alive asked, and a job that ends in a moment
    imported them for this question alone: 0.01 of a launch's CPU-seconds, issue 45)."""
    kids = descendants(pid)
    if kids is None:  # no children lists: psutil's walk of every process
        import psutil
        from dfdoctor.diagnose import jobstacks
        tree = [(p.pid, p.cmdline) for p in jobstacks.tree(pid)]
        error: Any = psutil.Error
    else:
        tree = [(p, lambda p=p: psutil_cmdline(p)) for p in [pid, *kids][:MAX_PROCESSES]]
        error = OSError
    for p, cmdline in tree:
        try:
            n = expected_ranks(cmdline())
        except error:
            continue
        if n is not None:
            return p, n
    return None


def settled(pid: int, state: Settling, deep: bool = True) -> Optional[str]:
    """None when every process the job should have is alive and past its start; else why not, in words.
    Without `deep` only the cheap part runs (which ranks are alive); with it, one stack look at each rank."""
    found = _torchrun(pid)
    if found is None:
        return None
    from dfdoctor.diagnose import jobstacks  # start-up: see _torchrun
    agent, want = found
    samples = [s for s in (jobstacks.describe(p) for p in jobstacks.tree(agent)) if s and s.rank is not None]
    return ranks_settled(agent, want, samples, state, jobstacks.look_once if deep else None)


def ranks_settled(agent_pid: int, want: int, samples: list[ProcessSample], state: Settling,
                  look: Optional[Callable[[list[ProcessSample]], None]]) -> Optional[str]:
    """The settle rule on the ranks torchrun's agent `agent_pid` has now (this machine's, or a target's as its
    agent saw them): as many as asked for, none gone since first seen, none inside init_process_group. `look`
    takes one stack look at each (None: not now; on a target the agent has looked already)."""
    for s in samples:
        state.ranks_seen.setdefault(s.pid, s.rank)
    alive = {s.pid for s in samples}
    state.absent = max(0, want - len(samples))
    for gone_pid, rank in state.ranks_seen.items():
        if gone_pid not in alive:
            note = f"rank {rank} (pid {gone_pid}) ended while dfdoctor watched"
            if note not in state.lost:
                state.lost.append(note)
    if state.lost:
        return "; ".join(state.lost)
    if len(samples) < want:
        return f"{len(samples)} of {want} ranks are alive"
    if look is not None:
        look(samples)
    if not any(s.looks for s in samples):
        return "not looked at yet"
    from dfdoctor.diagnose import waits  # start-up: see _torchrun
    inside = [s.rank for s in samples if s.looks and
              waits.classify(s.looks[-1].stacks.text, s.looks[-1].kernel, s.store).kind == waits.RENDEZVOUS]
    if inside:
        return f"rank(s) {', '.join(map(str, sorted(inside)))} still in init_process_group"
    if state.since is None:
        state.since = time.time()
    # "not waiting in", not "past": a script that never calls init_process_group (gat under torchrun) is in no
    # rendezvous either, and was said to be past one
    state.notes = [f"torchrun pid {agent_pid}: {len(samples)} of {want} ranks alive, none waiting in "
                   f"init_process_group, for {time.time() - state.since:.1f} s"]
    return None
