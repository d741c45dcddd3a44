"""A quiet job's verdict from the stacks of all its processes: who waits, for whom, and where.

A wait counts only when both looks (jobstacks.sample_job, a second or more apart) show it in the same place;
a process seen moving is working. Distributed first, because one rank's wait is explained by another rank:
ranks in `init_process_group` wait for the ranks that are not there; ranks in a collective wait for the one
that is not in it. Then one process's own wait: a DataLoader worker, stdin, a file lock, a timer, a socket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import psutil
from dfdoctor import causes
from dfdoctor.diagnose import download_cache, elastic, init_ahead, threadwaits, waits
from dfdoctor.diagnose.jobstacks import ProcessSample, exit_words, look_once
from dfdoctor.diagnose.waits import Wait, classify, main_of
from dfdoctor.agent.ranks import nproc as expected_ranks

BUFFERED_AFTER_S = 10.0  # silence before a working, block-buffered process is called output-buffered
WAKEUPS_STILL = 5  # a thread in one long wait is switched in about never; a loop of short sleeps, many times
# ...but a thread seen asleep in the same time.sleep in every look wakes as often as its sleeps end: that alone is
# no work, and a poll loop of 0.2 s sleeps (5 a second) counted 5 or 7 wake-ups as the looks were 1.0 or 1.3 s
# apart, `running [sleeping]` one run and `output-buffered` the next. Asleep there, it is still up to this many
# wake-ups a second (sleeps of 0.1 s and longer); a loop of shorter sleeps is a loop that works (print, sleep).
# Counted as the sleeps end: voluntary switches only (load preempts the loop as it runs between two sleeps), and
# one more than the rate (a loop of 0.1 s sleeps ends 10 of them in 0.95 s where one ends at each edge: it was
# counted 10.1 a second, `output-buffered`, at every gap).
SLEEP_LOOP_STILL_PER_S = 10.0
EVIDENCE_BUDGET = 52  # evidence lines for the processes (reports show 60; the verdict's own lines come first)
EXCERPT_FRAMES = 6  # per process, in the evidence: enough to see the wait and the user's line above it


@dataclass
class Finding:
    """What the stacks showed: a verdict's state, cause, headline and fix, and the per-process lines."""

    state: str
    cause: Optional[str]
    headline: str
    fix: str
    lines: list[str] = field(default_factory=list)


# A rule's "nothing is said yet": its looks lean its way without proving it, so no later rule (a buffered stdout)
# may speak over it; the watch looks again.
_UNDECIDED = Finding("undecided", None, "", "")


@dataclass
class Seen:
    """One process with the wait of each look."""

    proc: ProcessSample
    waits: list[Wait]

    @property
    def wait(self) -> Wait:
        return self.waits[-1]

    @property
    def steady(self) -> bool:
        """The same wait in every look, and (a wait, not work) no more CPU than noise."""
        spent, woke = self.proc.cpu_spent(), self.proc.wakeups()
        return len(self.waits) >= 2 and len({w.key() for w in self.waits}) == 1 and \
            (spent is None or spent < 0.3) and (woke is None or woke <= WAKEUPS_STILL or self.sleeps_still)

    @property
    def sleeps_still(self) -> bool:
        """Asleep in the same time.sleep in every look, woken no more often than its sleeps end (at most
        SLEEP_LOOP_STILL_PER_S a second, and one at the edge of the looks' span): its wake-ups are its timer's,
        not work."""
        woke = self.proc.woken_from_waits()
        return self.same_place and self.wait.kind == waits.SLEEP and woke is not None and \
            woke <= SLEEP_LOOP_STILL_PER_S * self.proc.span_s() + 1

    @property
    def same_place(self) -> bool:
        """The same wait in every look, whatever the CPU: NCCL (and a lazily started group) waits for a peer by
        spinning, so a rank stuck in init_process_group or a collective can burn a core and never move."""
        return len(self.waits) >= 2 and len({w.key() for w in self.waits}) == 1

    @property
    def spins_in_place(self) -> bool:
        """Seen in the same wait in every look where spinning is how that wait waits (NCCL, a CUDA synchronise):
        its CPU time is no progress."""
        return self.same_place and self.wait.kind in (waits.CUDA_SYNC, waits.RENDEZVOUS, waits.COLLECTIVE)

    def moved(self) -> Optional[str]:
        """The progress the looks show, in words (None: none): a stack that changed in any thread, CPU time that
        grew, a main thread woken again and again (a download that trickles in). A wait that spins counts no CPU."""
        if any(w.kind in (waits.AGENT, waits.CHILD) for w in self.waits):
            return None  # a supervisor's own loop (torchrun's agent, a shell waiting for its child) is not the job's
        looks = [lk for lk in self.proc.looks if lk.stacks.text]
        if len(looks) >= 2 and threadwaits.signature(looks[0].stacks.text) != threadwaits.signature(looks[-1].stacks.text):
            return f"{self.proc.name()}: its stacks moved between two looks"
        if self.spins_in_place:
            return None
        spent, woke = self.proc.cpu_spent(), self.proc.wakeups()
        if spent is not None and spent > 0.3 and self.unread_python:
            return None  # CPU, but whether work or a spinning wait (CUDA sync, NCCL) only its stack tells: cpu_unread
        if spent is not None and spent > 0.3:
            return f"{self.proc.name()}: {spent:.1f} s of CPU between two looks"
        if woke is not None and woke > WAKEUPS_STILL and not self.unread_python and not self.sleeps_still:
            # (unread: a poll, or work?)
            return f"{self.proc.name()}: its main thread woke {woke} times between two looks"
        return None

    @property
    def unread_python(self) -> bool:
        """A Python process whose stacks no look could read (no py-spy, or py-spy refused): only the kernel's view."""
        return self.proc.python and not any(lk.stacks.tool == "py-spy" for lk in self.proc.looks)

    def cpu_unread(self) -> Optional[str]:
        """A Python process seen spending CPU whose stacks could not be read, in words (None: not so): the CPU may
        be work, or a wait that spins (a CUDA synchronise, an NCCL collective), and only the stack can tell."""
        spent = self.proc.cpu_spent()
        if not self.unread_python or spent is None or spent <= 0.3:
            return None
        why = next((lk.stacks.error for lk in self.proc.looks if lk.stacks.error), None) or "its stack was not read"
        return (f"{self.proc.name()} spent {spent:.1f} s of CPU between two looks, but its Python stack could not "
                f"be read ({why}): work, or a wait that spins (a CUDA synchronise, an NCCL collective), is not "
                "established")

    def threads(self) -> list[threadwaits.ThreadWait]:
        """Every thread's wait in the last look."""
        look = self.proc.last
        return threadwaits.threads_of(look.stacks.text, look.kernel.syscall, look.stacks.sources) \
            if look and look.stacks.text else []

    def at(self) -> str:
        """`ddp.py:3 (<module>)`: the user's line where it is, else the innermost frame."""
        f = self.wait.user or self.wait.where
        return f.short() if f else "no Python frame"


def seen(samples: list[ProcessSample]) -> list[Seen]:
    """The waits of every process, look by look."""
    return [Seen(p, _between_sleeps(p, [classify(look.stacks.text, look.kernel, p.store) for look in p.looks]))
            for p in samples if p.looks]


def _between_sleeps(p: ProcessSample, ws: list[Wait]) -> list[Wait]:
    """A look that caught a loop of sleeps between two of them, read as the sleep its other looks show: the
    kernel says its main thread runs (woken, waiting for a core) while its stack is a sleeping look's own, frame
    for frame. Load stretches that wait: one look in thirty of a silent loop of 0.1 s sleeps under CPU hogs fell
    there, and the loop was called output-buffered (its CPU and wake-ups still say whether it works)."""
    i = next((i for i, w in enumerate(ws) if w.kind == waits.SLEEP and p.looks[i].stacks.text), None)
    frames = waits.main_frames(p.looks[i].stacks.text) if i is not None else ()
    if not frames:
        return ws
    return [ws[i] if w.kind != waits.SLEEP and lk.kernel.syscall == "running" and
            waits.main_frames(lk.stacks.text) == frames else w for w, lk in zip(ws, p.looks)]


def excerpt(s: Seen, frames: int = EXCERPT_FRAMES) -> list[str]:
    """A process's one-line summary and its main thread's innermost `frames` frames."""
    w = s.wait
    what = f"{w.kind}" + (f" [{w.detail}]" if w.detail else "")
    out = [f"{s.proc.name()}: {what} at {s.at()}" + ("" if s.steady or w.kind == waits.WORKING else " (moving)")]
    look = s.proc.last
    main = main_of(look.stacks.text) if look else None
    if main is not None:
        out += [f"    {f.short()}" for f in main.frames[:frames]]
        if len(main.frames) > frames:
            out.append(f"    ... {len(main.frames) - frames} outer frame(s)")
    elif look is not None and look.stacks.error:
        out.append(f"    (no Python stack: {look.stacks.error})")
    return out


# The last evidence line: every pid of the job's tree (torchrun's ranks run in sessions of their own). The verdict
# adds `dfdoctor stop RUN` after it, which ends them all; a Slurm verdict leaves the line out (the pids are a node's).
WHOLE_JOB = "the whole job, ranks in sessions of their own included: pids "


def judge(samples: list[ProcessSample], quiet_s: float, local: bool = True,
          flushed: bool = False, busy_s: Optional[float] = None) -> Optional[Finding]:
    """The finding the stacks support, or None when they show nothing certain. `local`: the pids are this
    machine's (a lock holder outside the job is looked up here; on a target only the job's own are named).
    `flushed`: the job's stdout was seen to deliver output before a block buffer was full (print(...,
    flush=True), -u, a logging handler): its silence is not a block buffer, whatever its command line says.
    `busy_s`: the part of the silence a block buffer can explain, since the job was seen past its imports
    (None: all of it)."""
    all_seen = seen(samples)
    ordered = sorted(all_seen, key=lambda s: (s.proc.rank is None, s.proc.rank or 0))  # ranks first
    # one line per process, then each one's stack: the frames shrink with the job so that all of it fits the
    # 60 evidence lines a report shows (3 processes: 6 frames each; 16: 1 each)
    n = max(1, len(ordered))
    frames = max(1, min(EXCERPT_FRAMES, (EVIDENCE_BUDGET - 3 * n) // n))
    excerpts = [excerpt(s, frames) for s in ordered]
    heads = [e[0] for e in excerpts] if 1 < n <= 6 else []  # a big job: each excerpt's first line is its summary
    lines = heads + [line for e in excerpts for line in e]
    pids = " ".join(str(s.proc.pid) for s in all_seen if not s.proc.gone)
    lines.append(f"{WHOLE_JOB}{pids}")
    dead = [p for p in samples if p.exited]  # children that died and were never reaped
    rules = (_rank_missing, _collective_hang, _ranks_ended_without_peer, _dataloader,
             lambda a, q: _empty_loader(a, q, local),
             *(() if flushed else (lambda a, q: _buffered(a, q, q if busy_s is None else busy_s),)),
             lambda a, q: every_thread_waits(a, dead), lambda a, q: _workers_died(a, dead), _single_wait)
    for rule in rules:
        found = rule(all_seen, quiet_s) if rule is not _single_wait else rule(all_seen, quiet_s, local)
        if found is _UNDECIDED:
            return None  # the looks lean one way without proving it: the watch looks again, nothing is said yet
        if found is not None:
            found.lines = found.lines + lines
            return found
    return None


def _ranks(all_seen: list[Seen]) -> list[Seen]:
    return sorted((s for s in all_seen if s.proc.rank is not None and not s.proc.gone), key=lambda s: s.proc.rank)


def _names(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _rank_missing(all_seen: list[Seen], quiet_s: float) -> Optional[Finding]:
    """Ranks wait in init_process_group for ranks that never arrived: name those and where they are."""
    ranks = _ranks(all_seen)
    waiting = [s for s in ranks if s.same_place and s.wait.kind == waits.RENDEZVOUS]
    if not waiting:
        return None
    absent = [s for s in ranks if s.wait.kind != waits.RENDEZVOUS]
    if not _spin_explained(waiting, absent, ranks):
        return None
    if any(s.wait.kind == waits.IMPORT for s in absent) and quiet_s < 60:
        return None  # still importing: a loaded machine can take that long; look again later
    world = max((s.proc.world_size or 0 for s in ranks), default=0)
    unseen = sorted(set(range(world)) - {s.proc.rank for s in ranks})
    if not absent and not unseen:
        return None
    by_kernel = all(s.wait.detail.startswith(waits.STORE_WAIT) for s in waiting)  # no stack: the store's socket
    if by_kernel and any(s.proc.joined is not False for s in absent):
        return None  # a rank that holds its store connection (or whose sockets were not read) may be past it
    where = [f"{_names([s.proc.rank])} (pid {s.proc.pid}) is at {s.at()}" +
             (f", {s.wait.kind}" + (f" [{s.wait.detail}]" if s.wait.detail else "") if s.wait.kind else "") +
             (f", no connection to the rendezvous store {s.proc.store}" if by_kernel else "") for s in absent]
    if unseen:
        where.append(_unseen_words(unseen, all_seen))
    missing = [s.proc.rank for s in absent] + unseen
    them = "it" if len(missing) == 1 else "them"
    head = (f"{_names(missing)} never arrived in init_process_group; {_names([s.proc.rank for s in waiting])} "
            f"wait{'s' if len(waiting) == 1 else ''} for {them} there")
    line = "its line is below"
    if by_kernel:
        head = (f"{_names(missing)} never arrived at the rendezvous; {_names([s.proc.rank for s in waiting])} "
                f"wait{'s' if len(waiting) == 1 else ''} for {them} on the rendezvous store {waiting[0].proc.store} "
                "(MASTER_ADDR:MASTER_PORT; seen from the kernel: no Python stack was read)")
        line = f"`py-spy dump --pid {absent[0].proc.pid}` shows its line" if absent else "its line is not known"
    fix = (f"Make every rank reach init_process_group: the missing rank is stuck before it ({line}). "
           + ("" if _standalone(all_seen) else "A rank on another node must be started with the same "
              "MASTER_ADDR/MASTER_PORT and --nnodes. ") +
           "Set a short `timeout=` on init_process_group so such a wait fails instead of hanging.")
    return Finding("failed", causes.RANK_MISSING, head, fix, where)


def _unseen_words(unseen: list[int], all_seen: list[Seen]) -> str:
    """Where ranks of the world that no process here has may be: on another node, unless the job's torchrun is
    --standalone, whose rendezvous (localhost, a free port) no other node can join: every rank starts here."""
    if _standalone(all_seen):
        return (f"{_names(unseen)}: no such process here ({'it' if len(unseen) == 1 else 'they'} ended or died: "
                "--standalone starts every rank on this node)")
    return f"{_names(unseen)}: no such process here (on another node, or it died)"


def _standalone(all_seen: list[Seen]) -> bool:
    """The job's torchrun runs with --standalone (or PET_STANDALONE=1): one node's rendezvous, every rank started
    here, none on another node to start."""
    return any(s.proc.asked is not None and elastic.standalone(s.proc.asked) for s in all_seen)


def _collective_hang(all_seen: list[Seen], quiet_s: float) -> Optional[Finding]:
    """Ranks wait in a collective that another rank never called: name that rank and where it is instead."""
    ranks = _ranks(all_seen)
    inside = [s for s in ranks if s.same_place and s.wait.kind == waits.COLLECTIVE]
    if not inside:
        return None
    op = inside[0].wait.detail
    others = [s for s in ranks if not (s.wait.kind == waits.COLLECTIVE and s.wait.detail == op)]
    if not _spin_explained(inside, others, ranks):
        return None
    world = max((s.proc.world_size or 0 for s in ranks), default=0)
    unseen = sorted(set(range(world)) - {s.proc.rank for s in ranks})
    if not others and not unseen:
        return None
    where = [f"{_names([s.proc.rank])} (pid {s.proc.pid}) is not in {op}: it is at {s.at()} ({s.wait.kind}"
             + (f" [{s.wait.detail}]" if s.wait.detail else "") + ")" for s in others]
    if unseen:
        where.append(_unseen_words(unseen, all_seen))
    called = inside[0].wait.user.short() if inside[0].wait.user else op
    head = (f"{_names([s.proc.rank for s in inside])} wait{'s' if len(inside) == 1 else ''} in {op} (called at "
            f"{called}); {_names([s.proc.rank for s in others] + unseen)} never joined it")
    fix = ("Every rank must call the same collectives in the same order: the rank named here skipped or has not "
           "reached this one (a collective inside `if rank == 0:`, an early `continue`, unequal batches per "
           "rank). Set `timeout=` on init_process_group so a mismatch fails instead of hanging.")
    return Finding("failed", causes.COLLECTIVE_HANG, head, fix, where)


def _spin_explained(waiting: list[Seen], absent: list[Seen], ranks: list[Seen]) -> bool:
    """Ranks that wait quietly are waiting. A rank that spins in the same place (NCCL's way of waiting) is only
    called waiting when what it waits for is seen: a rank missing from the world, or one held still elsewhere.
    A rank of a healthy loop can be caught in its collective twice while its peers move on."""
    if all(s.steady for s in waiting):
        return True
    world = max((s.proc.world_size or 0 for s in ranks), default=0)
    unseen = set(range(world)) - {s.proc.rank for s in ranks}
    return bool(unseen) or any(s.steady for s in absent)


def _ranks_ended_without_peer(all_seen: list[Seen], quiet_s: float) -> Optional[Finding]:
    """Some ranks already ended while another never joined the process group. With a lazy backend (NCCL, gloo
    with TORCH_GLOO_LAZY_INIT=1) init_process_group returns without waiting for the other ranks, so a rank 0
    that does no collective finishes and exits; the rank left behind waits in its own code and nobody waits in
    the group: no rule above sees it. The ended ranks are the local ranks torchrun's agent (still alive, it
    waits for every rank) was asked for and no longer has; every rank it still has must be held up so (one that
    works may be on its way to the group: under load, a rank 0 still importing torch was left out of the
    verdict)."""
    for agent in all_seen:
        want = expected_ranks(agent.proc.cmdline) if not agent.proc.gone else None
        if want is None:
            continue
        mine = [s for s in _ranks(all_seen) if s.proc.ppid == agent.proc.pid]
        ended = sorted(set(range(want)) - {s.proc.local_rank for s in mine})
        behind = [s for s in mine if s.steady and s.wait.kind not in (waits.RENDEZVOUS, waits.COLLECTIVE)
                  and s.proc.joined is not True and init_ahead.ahead(s.wait.user)]
        if not ended or not behind or len(behind) < len(mine):
            continue  # a rank of this agent still working may yet arrive in init_process_group
        world = max((s.proc.world_size or 0 for s in mine), default=0)
        local = "" if world == want else "local "  # on one node the local rank is the rank
        gone = ("local " if local else "") + _names(ended)
        them = "it" if len(behind) == 1 else "them"
        head = (f"{_names([s.proc.rank for s in behind])} never joined the process group; {gone} already "
                f"ended without {them} (init_process_group returned there without waiting: a lazy backend)")
        where = [f"{_names([s.proc.rank])} (pid {s.proc.pid}) is at {s.at()}, {s.wait.kind}"
                 + (f" [{s.wait.detail}]" if s.wait.detail else "") + ", not in init_process_group"
                 + (f", no connection to the rendezvous store {s.proc.store}" if s.proc.joined is False else "")
                 for s in behind]
        where.append(f"torchrun pid {agent.proc.pid} was asked for {want} local rank(s); {gone} no longer "
                     f"run{'s' if len(ended) == 1 else ''} (torchrun reports their exit codes once every rank ended)")
        fix = ("Make every rank reach init_process_group: the rank named here is held up before it (its line is "
               "below). Let rank 0 wait for the others before it ends (`dist.barrier()` after "
               "init_process_group, or `TORCH_DIST_INIT_BARRIER=1`), so a missing rank fails the job instead of "
               "leaving it half-finished, and set a short `timeout=` on init_process_group.")
        return Finding("failed", causes.RANK_MISSING, head, fix, where)
    return None


def _workers_of(all_seen: list[Seen], pid: int) -> list[Seen]:
    return [s for s in all_seen if s.proc.ppid == pid]


def _dataloader(all_seen: list[Seen], quiet_s: float) -> Optional[Finding]:
    """The training loop waits for a batch: say which worker holds it up, or that one died."""
    for s in all_seen:
        if not (s.steady and s.wait.kind == waits.DATALOADER):
            continue
        workers = [w for w in _workers_of(all_seen, s.proc.pid) if w.wait.kind == waits.DATALOADER_WORKER]
        dead = [w for w in workers if w.proc.gone or w.proc.exited is not None or (w.proc.here and _zombie(w.proc.pid))]
        if dead:
            head = f"{s.proc.name()} waits for a batch, and its DataLoader worker pid {dead[0].proc.pid} died"
            where = [f"worker pid {w.proc.pid} is gone" for w in dead]
        elif workers:
            w = workers[0]
            head = (f"{s.proc.name()} waits for a batch from its DataLoader workers; worker pid {w.proc.pid} is "
                    f"stuck at {w.at()}" + (f" ({w.wait.detail})" if w.wait.detail else ""))
            where = [f"worker pid {x.proc.pid} at {x.at()}" + (f" ({x.wait.detail})" if x.wait.detail else "")
                     for x in workers]
        else:
            head = f"{s.proc.name()} waits for a batch from DataLoader workers that are not there"
            where = []
        fix = ("Fix what the worker waits on in your Dataset's __getitem__ (its line is below); "
               "`num_workers=0` runs it in the main process, where a traceback or py-spy shows it directly; "
               "set the DataLoader's `timeout=` so a stuck worker raises instead of hanging.")
        return Finding("failed", causes.DATALOADER_STUCK, head, fix, where)
    return None


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _holder(pid: int) -> str:
    try:
        cmd = " ".join(" ".join(psutil.Process(pid).cmdline()).split())
        return f"pid {pid} ({cmd[:80]}{'...' if len(cmd) > 80 else ''})"
    except psutil.Error:
        return f"pid {pid}"


def _single_wait(all_seen: list[Seen], quiet_s: float, local: bool = True) -> Optional[Finding]:
    """One process waits on something named by the kernel: stdin, a file lock, a timer, a socket, the GPU."""
    order = (waits.STDIN, waits.LOCK, waits.CUDA_SYNC, waits.COMPILE, waits.LISTEN, waits.SOCKET, waits.SLEEP)
    candidates = [s for s in all_seen if (s.steady or s.spins_in_place) and not s.proc.gone and s.proc.python
                  and s.wait.kind in order]
    moving = [s for s in _ranks(all_seen) if not s.steady]
    if moving or progress(all_seen):  # another process imports or works (a rank, torch.compile's workers): one
        # process's timer, download or compile wait is no verdict on the job yet
        candidates = [s for s in candidates if s.wait.kind in (waits.STDIN, waits.LOCK)]
    for s in sorted(candidates, key=lambda s: order.index(s.wait.kind)):
        w, who = s.wait, s.proc.name()
        look = s.proc.last
        k = look.kernel if look else None
        if w.kind == waits.STDIN:
            return Finding("failed", causes.WAITING_FOR_INPUT, f"{who} waits for input on stdin at {s.at()}",
                           "The job asks a question (input()) that nobody will answer: pass the answer as an "
                           "option or environment variable, or run it with stdin from /dev/null so it fails fast.",
                           [f"stdin is {k.target if k else '?'}"])
        if w.kind == waits.LOCK:
            mine = next((x.proc for x in all_seen if k and x.proc.pid == k.holder), None)
            who_holds = (f"pid {mine.pid} ({' '.join(mine.cmdline)[:80]})" if mine else
                         _holder(k.holder) if local else f"pid {k.holder}") if k and k.holder else ""
            held = f"; {who_holds} holds it" if who_holds else ""
            return Finding("failed", causes.WAITING_ON_LOCK, f"{who} waits for a lock on {k.target if k else '?'} "
                           f"at {s.at()}{held}", "Stop or wait for the process that holds the lock (named here), "
                           "or give this run a lock file of its own.", [f"{who}: {k.words() if k else w.detail}"])
        if w.kind == waits.SLEEP:
            return Finding("running", causes.SLEEPING, f"{who} is alive and asleep in time.sleep at {s.at()}; "
                           f"nothing was written for {quiet_s:.0f} s", "Nothing is broken that dfdoctor can see: "
                           "the job sleeps where its code says. Follow it with `dfdoctor status` later.", [])
        if w.kind == waits.LISTEN:
            return Finding("unknown", causes.WAITING_ON_NETWORK, f"{who} waits for a client to connect on "
                           f"{w.detail} at {s.at()} (it serves; nothing is being downloaded)",
                           f"Nothing has connected to {w.detail}: start the client or the other processes that "
                           "should connect to it, and check that they are given this host and port.",
                           [f"{who}: {k.words() if k else w.detail}"])
        if w.kind == waits.SOCKET:
            return _socket_wait(s, who, k)
        if w.kind == waits.CUDA_SYNC:
            busy = gpu_busy() if local else ""
            return Finding("unknown", causes.CUDA_SYNC_WAIT, f"{who} waits in CUDA synchronisation at {s.at()} "
                           f"for {quiet_s:.0f} s" + (f" while {busy}: a kernel that does not end (a collective "
                                                     "waiting for a peer, an endless loop in a kernel)" if busy else
                                                     ": the GPU has not finished its queued work"),
                           "A GPU kernel or a collective on another stream does not finish: look at the other ranks "
                           "here and at `nvidia-smi`; run with CUDA_LAUNCH_BLOCKING=1 to find the kernel.",
                           [f"the GPUs: {busy}"] if busy else [])
        if w.kind == waits.COMPILE:
            return Finding("unknown", causes.COMPILE_WORKERS_WAIT, f"{who} waits for torch.compile's worker "
                           f"processes at {s.at()}", "Compiling can take minutes; if it never ends, set "
                           "TORCHINDUCTOR_COMPILE_THREADS=1 to compile in the process itself and see where.", [])
    return None


def _socket_wait(s: Seen, who: str, k) -> Finding:
    """A read from a socket that never answers: a download or a remote service. Where the frames that read are a
    library's that keeps its own cache (tiktoken's BPE files), what it fetches and that cache are named."""
    w, look = s.wait, s.proc.last
    main = main_of(look.stacks.text) if look else None
    lib = download_cache.library_of(f.file for f in main.frames) if main else None
    what = f"{lib[0]}: a download" if lib else "a download or a remote service"
    fix = (f"Check that the host answers from here. {lib[1]}" if lib else
           "Check that the host answers from here; pre-download the files (or set HF_HUB_OFFLINE=1 with a local "
           "cache) and set a timeout on the request.")
    return Finding("unknown", causes.WAITING_ON_NETWORK, f"{who} waits for data from {w.detail} at {s.at()} "
                   f"({what})", fix, [f"{who}: {k.words() if k else w.detail}"])


def gpu_busy() -> str:
    """`GPU 0 is 100 % busy`, from nvidia-smi here ('' when no GPU is busy or nvidia-smi cannot say): with the
    host waiting in a synchronise, a GPU at full use is running the kernel that does not end."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    rows = [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.count(",") == 1]
    busy = [f"GPU {i} is {u} % busy" for i, u in rows if u.isdigit() and int(u) >= 90]
    return ", ".join(busy)


def _empty_loader(all_seen: list[Seen], quiet_s: float, local: bool) -> Optional[Finding]:
    """A busy silence that is a loop over a DataLoader with no batch, not a block buffer (diagnose/empty_loop.py):
    more looks are taken here when those taken leave it undecided (`local`: the pids are this machine's);
    _UNDECIDED when they still do."""
    # start-up: empty_loop reads the project's source (dfdoctor.project, a fifth of what `launch` imported before
    # its job started, issue 45); it is wanted only on a silent job's look
    from dfdoctor.diagnose import empty_loop
    found = empty_loop.empty_loader(all_seen, _look_again if local else None)
    if found == empty_loop.UNDECIDED:
        return _UNDECIDED
    return Finding("failed", causes.DATA_EMPTY, *found) if found else None


def _look_again(s: Seen) -> None:
    """One more look at one process, its wait read as the others were."""
    look_once([s.proc])
    if s.proc.looks:
        s.waits.append(classify(s.proc.last.stacks.text, s.proc.last.kernel, s.proc.store))


def _buffered(all_seen: list[Seen], quiet_s: float, busy_s: float) -> Optional[Finding]:
    """A Python process works (on CPU, its stack moving) while its stdout sits in a block buffer. Only after a
    longer silence past its imports (`busy_s`): a job that has not printed yet (building a model) looks the same
    for a while, and one seen importing torch has nothing in its buffer while it does."""
    if busy_s < BUFFERED_AFTER_S:
        return None
    from dfdoctor.diagnose import empty_loop  # start-up: as _empty_loader's
    for s in all_seen:
        spent, woke = s.proc.cpu_spent() or 0.0, s.proc.wakeups() or 0
        if any(w.kind in (waits.AGENT, waits.CHILD, waits.IMPORT, waits.DATALOADER_WORKER) for w in s.waits):
            continue  # a supervisor's loop (torchrun's agent, a shell) or start-up is not the job's work
        if s.proc.buffered and not s.proc.gone and not s.steady and (spent > 0.3 or woke > WAKEUPS_STILL):
            if empty_loop.head_only(s) is not None:
                continue  # seen only at a `for` head: maybe an empty loader's loop (nothing in a buffer), not proven
            return Finding("failed", causes.OUTPUT_BUFFERED, f"{s.proc.name()} is working ({spent:.1f} s of CPU, "
                           f"woken {woke} times between two looks, at {s.at()}) but nothing reached the log for "
                           f"{quiet_s:.0f} s: Python block-buffers stdout when it is not a terminal",
                           "Run Python with -u or set PYTHONUNBUFFERED=1 (or print(..., flush=True)).",
                           ["stdout is a pipe/file, not a terminal; no -u, no PYTHONUNBUFFERED",
                            *([f"{busy_s:.0f} s of that silence since a look saw it past its imports"]
                              if busy_s < quiet_s - 0.5 else [])])
    return None


def progress(all_seen: list[Seen]) -> list[str]:
    """What the looks show moving in the job, in words (empty: nothing moved)."""
    return [m for m in (s.moved() for s in all_seen if not s.proc.gone) if m]


def _dead_words(dead: list[ProcessSample]) -> str:
    return ", ".join(f"pid {p.pid} ({exit_words(p.exited)})" for p in dead)


def _workers_died(all_seen: list[Seen], dead: list[ProcessSample]) -> Optional[Finding]:
    """Child processes died and nobody reaped them (zombies) while every live process of the job stays still: a
    supervisor that sleeps on while its workers are gone. The verdict adds the workers' own traceback."""
    alive = [s for s in all_seen if not s.proc.gone]
    if not dead or not alive or progress(all_seen):
        return None
    parents = sorted({p.ppid for p in dead if p.ppid is not None})
    waiting = [s for s in alive if s.proc.pid in parents] or alive
    head = (f"{len(dead)} worker process(es) of the job died ({_dead_words(dead)}) and were never reaped, while "
            f"{waiting[0].proc.name()} goes on at {waiting[0].at()} without them")
    fix = ("The workers' own error is below: fix it. Have the supervisor wait for its workers (join(), "
           "Popen.wait(), os.waitpid) and fail when one fails, instead of sleeping on without them.")
    return Finding("failed", causes.WORKERS_DIED, head, fix, [f"dead child {_dead_words([p])} of pid {p.ppid}, "
                                                              "a zombie: its parent never reaped it" for p in dead])


def every_thread_waits(all_seen: list[Seen], dead: list[ProcessSample]) -> Optional[Finding]:
    """Every thread of every live process waits on something only the job itself could end (an Event, a
    Condition, a join, a lock, a queue or pipe read), and nothing moved between the looks: the job is stuck.
    Said with each wait, its line, and why nothing can end it."""
    alive = [s for s in all_seen if not s.proc.gone]
    if not _all_still(alive):
        return None
    threads = [(s, t) for s in alive if s.proc.python for t in s.threads()]
    everyone = [t for _, t in threads]
    if not everyone or any(t.kind not in threadwaits.INNER for t in everyone):
        return None
    where = [f"{s.proc.name()} thread {t.thread}: {t.words()}" for s, t in threads]
    cycle = threadwaits.lock_cycle(everyone)
    if cycle is not None:
        return Finding("failed", causes.WAITING_ON_LOCK, _cycle_words(cycle), _LOCK_ORDER_FIX, where)
    s, first = next(((s, t) for s, t in threads if t.kind != threadwaits.JOIN), threads[0])  # a join waits on
    who = f"{s.proc.name()}, in its only thread," if len(everyone) == 1 else \
        f"every thread of the job waits ({len(everyone)} in {len(alive)} process(es)); thread {first.thread} of " \
        f"{s.proc.name()}"
    head = f"{who} {first.words()}: {_nothing_ends(first, everyone, dead)}"
    cause = causes.WAITING_ON_LOCK if first.kind == threadwaits.LOCK else causes.STUCK
    return Finding("failed", cause, head, _STUCK_FIX, where)


def _all_still(alive: list[Seen]) -> bool:
    """Every live process is Python (or a shell waiting for its child), none moved, none inside an import (a
    wait there is import-hang's to name)."""
    if not alive or progress(alive) or any(not s.proc.python and s.wait.kind != waits.CHILD for s in alive):
        return False
    return not any(s.wait.kind == waits.IMPORT or (s.proc.last and "_find_and_load" in s.proc.last.stacks.text)
                   for s in alive)


def _cycle_words(cycle: list[threadwaits.ThreadWait]) -> str:
    """`two threads hold each other's lock: thread a holds `x` and waits for `y` at ...; thread b ...`."""
    locks = {t.lock for t in cycle}
    held = "; ".join(f"thread {t.thread} holds `{next(h for h in t.holds if h in locks)}` and waits for `{t.lock}` "
                     f"at {t.at.short() if t.at else '?'}" for t in cycle)
    return f"{'two' if len(cycle) == 2 else len(cycle)} threads hold each other's lock: {held}"


def _nothing_ends(first: threadwaits.ThreadWait, everyone: list[threadwaits.ThreadWait],
                  dead: list[ProcessSample]) -> str:
    """What could end the wait, and why it will not."""
    alone = len(everyone) == 1
    if first.kind == threadwaits.PIPE and dead:
        return f"the process that wrote to it is gone ({_dead_words(dead)})" + \
            ("" if alone else "; every other thread of the job waits too")
    if first.kind == threadwaits.EVENT:
        return "nothing can set it" if alone else "every thread that could set it waits too"
    if first.kind == threadwaits.LOCK:
        return "no other thread can release it" if alone else "every thread that could release it waits too"
    return "nothing else in the job runs to end it" if alone else "every thread that could end it waits too"


_LOCK_ORDER_FIX = ("Take the locks in one order in every thread (or hold one at a time); a `timeout=` on "
                   "acquire() makes such a wait fail instead of hanging. The lines are below.")
_STUCK_FIX = ("Nothing in the job can end this wait: make sure what it waits for happens (the thread or "
              "process that should set, put, write or release is named below, or is gone), and give the wait a "
              "timeout so it fails instead of hanging.")
