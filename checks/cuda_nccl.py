"""cuda.nccl: can one process per GPU form an NCCL group, all-reduce a known sum and pass a barrier?

It starts one probe per rank (`probes/cuda_nccl_probe.py`, torchrun-style environment) in the training
interpreter, each in its own killable process group. A rank that fails or hangs is named, with the stage it
reached and its stack; the ranks that merely waited for it are told apart from it. Runs when two or more GPUs
are visible, or when the launch (torchrun --nproc_per_node N) or the config asks for a number of ranks.

Under `check --slurm-nodes` every node's cuda.nccl joins ONE group over the whole allocation, as a multi-node
torchrun would: node i runs global ranks i*n .. i*n+n-1, rank 0's store listens on the first node's NodeAddr.
Each node reports its own ranks; a node whose ranks only waited for another node's failed rank says so as a
warning, so the report's verdict leads with the node at fault.

Options ([tool.dfdoctor.checks."cuda.nccl"] or the environment of `dfdoctor check`):
  world_size / DFDOCTOR_NCCL_WORLD_SIZE   ranks to start, whatever is visible
  hang_rank  / DFDOCTOR_NCCL_HANG_RANK    make that rank hang before init_process_group (fault injection)
  fail_rank  / DFDOCTOR_NCCL_FAIL_RANK    make that rank raise before init_process_group (fault injection)
  backend    / DFDOCTOR_NCCL_BACKEND      'nccl' (default); 'gloo' runs the same test on CPUs
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Iterator, Optional

from dfdoctor import causes, check, error, fail, ok, skip, warn
from dfdoctor.launchline.commandline import as_lead
from dfdoctor.model import Result
from dfdoctor.numbers import whole
from dfdoctor.probe import ProbeOutcome, run_probe, unreached

from .cuda_common import (
    Visibility,
    cpu_only_build,
    expectation,
    guessed_python,
    innermost_frame,
    parse_visible,
    probe_env,
    stack_excerpt,
)

# The job's backend (diagnose.pg_backend), the Slurm step (slurm.step) and socket are imported by the functions
# that use them: every `check` imports this module before its workers fork, and cuda.nccl runs only where GPUs are
# (the first two: 13.5 M of a `check`'s 600 M instructions on a machine without GPUs, callgrind, round 25).
if TYPE_CHECKING:
    from dfdoctor.slurm.step import Step

DEFAULT_TIMEOUT = 120.0
STAGES = ("start", "import torch", "rendezvous", "census", "cuda device", "injected failure before init_process_group",
          "injected hang before init_process_group", "waiting for the other ranks",
          "init_process_group", "all_reduce", "barrier", "destroy_process_group", "done")
LIST_TIMEOUT_S = 10.0  # listing the GPUs imports nothing heavy; it only waits on a slow target connection
_WAITING = ("timed out", "timeout", "waiting for", "diststoreerror", "connection refused", "clients joined",
            "connection was likely closed")


@check("cuda.nccl", title="NCCL: one process per GPU all-reduces a known sum and passes a barrier",
       phases=("pre",), timeout=DEFAULT_TIMEOUT, imports_torch=True)
def cuda_nccl(ctx) -> Iterator[Result]:
    """Decide how many ranks, run them side by side, and name any rank that failed or hung."""
    yield from as_lead(_nccl(ctx), guessed_python(ctx))


def _nccl(ctx) -> Iterator[Result]:
    """The findings of cuda.nccl, in the training interpreter (which may be a guess: see cuda_nccl)."""
    from dfdoctor.diagnose.pg_backend import uses_nccl  # start-up: see the note at the imports
    try:
        hang_rank = _rank_opt(ctx, "hang_rank", "DFDOCTOR_NCCL_HANG_RANK")
        fail_rank = _rank_opt(ctx, "fail_rank", "DFDOCTOR_NCCL_FAIL_RANK")
        asked = _rank_opt(ctx, "world_size", "DFDOCTOR_NCCL_WORLD_SIZE")
    except ValueError as exc:
        yield error(str(exc), fix="give a whole number, or unset the option")
        return
    started = time.monotonic()
    vis, listing = _visible_gpus(ctx)
    unreachable = unreached(ctx, listing)
    if unreachable:
        yield unreachable
        return
    backend, backend_why, option = _backend(ctx, vis)
    world, why = _world_size(ctx, vis, backend, asked)
    step = _step(ctx)
    if isinstance(step, str):
        yield error(f"could not place this node in the Slurm step, so no group over the nodes was formed: {step}",
                    fix="run `scontrol show hostnames $SLURM_STEP_NODELIST` on a node to see what fails")
        return
    layout = Layout.over(step, world)
    if layout.world < 2:
        yield skip(f"{why}: an NCCL group needs two or more ranks (cuda.init reports on single GPUs)",
                   evidence=vis.problems, data={"nccl": {"visible": list(vis.visible), "world_size": world}})
        return
    limit = float(ctx.timeout or DEFAULT_TIMEOUT)
    data = {"nccl": {"backend": backend, "backend_why": backend_why, "backend_option": option,
                     "world_size": layout.world, "why": why, "ports_taken": [],
                     "injected_hang_rank": hang_rank, "injected_fail_rank": fail_rank, "visible": list(vis.visible)}}
    build = cpu_only_build(listing.payload) if uses_nccl(backend) and step is None else None
    if build:
        yield _cpu_only(build, layout, vis, backend, limit, data)
        return
    budget = max(2.0, limit - 1.5 - (time.monotonic() - started))  # the runner's deadline stays ahead of ours
    outcomes, taken = _run_ranks(ctx, layout, backend, (hang_rank, fail_rank), budget)
    ranks = [_rank_view(layout.first + r, out, vis, layout) for r, out in enumerate(outcomes)]
    data["nccl"].update(ports_taken=taken, ranks=ranks)
    if taken and outcomes and _port_taken(outcomes[0]):
        yield error(f"no group was formed: each port dfdoctor chose here for rank 0's store was taken by another "
                    f"program before rank 0 listened ({', '.join(map(str, taken))}); that says nothing about the job",
                    fix="run the check again; `ss -ltnp` shows which programs hold ports here", data=data,
                    evidence=tuple(_rank_line(r) for r in ranks))
        return
    if step is not None:
        data["nccl"]["nodes"] = {"names": list(step.nodes), "this": step.nodes[step.index],
                                 "ranks_per_node": world, "master": f"{step.head_addr}:{step.port}"}
    yield _verdict(ranks, layout, backend, limit, data)


def _cpu_only(build: dict, layout: Layout, vis: Visibility, backend: str, limit: float, data: dict) -> Result:
    """The verdict the ranks would give on a torch whose torch/version.py, read where the job runs, says it is a
    CPU-only build: each would import torch (1.5-2 CPU-s) only to fail at its GPU, with the probe's own words
    (cuda_nccl_probe.ready_gpu). That build has no CUDA, hence no NCCL: so none is started."""
    ranks = []
    for local in range(layout.local):
        rank = layout.first + local
        view = _rank_view(rank, ProbeOutcome([], None, "", "", 0.0), vis, layout)
        view.pop("stderr", None)  # "died" is what a probe that never answered reads as; this one never ran
        view.update(stage="cuda device", state="error", started=False, duration_s=0.0, waited_for=None, traceback=[],
                    error=f"RuntimeError: rank {rank} needs GPU {local}, but torch sees 0 GPU(s) "
                          f"(a CPU-only torch build)")
        ranks.append(view)
    data["nccl"].update(ranks=ranks, torch_build=build)
    verdict = _verdict(ranks, layout, backend, limit, data)
    return dataclasses.replace(verdict, evidence=verdict.evidence + (
        f"torch {build['version']} is a CPU-only build (cuda = None, hip = None), read from torch/version.py in the "
        f"training interpreter ({build['version_file']}): no rank was started, as each would have imported torch only "
        f"to find no GPU",))


def _backend(ctx, vis: Visibility) -> tuple[str, str, Optional[str]]:
    """The backend to test, why, and the job's option that sets it (if it has one): the one asked for, else the
    one the launched job's ranks will form.

    The job's own backend is read in every form (dfdoctor.diagnose.pg_backend); where it cannot be read and no GPU
    is visible, its ranks can only form a gloo group, so gloo is tested: an NCCL failure the job would never meet
    must not fail a healthy CPU job.
    """
    asked = _opt(ctx, "backend", "DFDOCTOR_NCCL_BACKEND")
    if asked:
        return str(asked), "the backend asked for (backend / DFDOCTOR_NCCL_BACKEND)", None
    if not expectation(ctx, "cuda.nccl").nproc:
        return "nccl", "the GPUs' own backend", None
    gpu = bool(vis.visible)
    from dfdoctor.diagnose.pg_backend import read_backend  # start-up: see the note at the imports
    read = read_backend(list(ctx.command), ctx.cwd)
    if read:
        return read.on(gpu), f"the job's: {read.why}" + ("" if gpu or read.with_gpu == read.without_gpu
                                                          else " (no GPU is visible here)"), read.option
    if not gpu:
        return "gloo", ("the job's backend is not set plainly in its script (its framework or a module starts the "
                        "group), and with no GPU visible its ranks can only form a gloo group"), None
    return "nccl", "the job's backend is not set plainly in its script, and GPUs are visible", None


class Layout:
    """Which ranks this node starts, out of how many, and where rank 0 listens."""

    def __init__(self, first: int, local: int, world: int, master: str, port: Optional[int],
                 step: Optional[Step] = None):
        self.first, self.local, self.world, self.master, self.port, self.step = first, local, world, master, port, step

    @classmethod
    def over(cls, step: Optional[Step], per_node: int) -> "Layout":
        """All ranks here (no step), or this node's share of one group over the step's nodes."""
        if step is None:
            return cls(0, per_node, per_node, "127.0.0.1", None)
        return cls(step.index * per_node, per_node, per_node * len(step.nodes), step.head_addr, step.port, step)

    def node_of(self, rank: int) -> Optional[str]:
        return self.step.node_of(rank, self.local) if self.step else None

    def node_env(self) -> dict[str, str]:
        """What a rank needs to check that every node counts as many ranks as this one (the probe's census)."""
        if self.step is None:
            return {}
        return {"DFDOCTOR_NCCL_NODE": str(self.step.index), "DFDOCTOR_NCCL_NODE_NAMES": ",".join(self.step.nodes)}


def _step(ctx) -> "Optional[Step] | str":
    """The Slurm step to span, when `check --slurm-nodes` asked for one group over its nodes (else None)."""
    from dfdoctor.slurm import step as slurm_step  # start-up: see the note at the imports
    env = ctx.env
    if env.get(slurm_step.ACROSS_NODES) != "1" or not ctx.target.runs_here:
        return None
    count = env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or "1"
    if whole(count, 1) < 2:
        return None
    return slurm_step.current(env)


def _opt(ctx, name: str, env_name: str):
    """A check option from the config, else from the environment dfdoctor was given."""
    value = ctx.option("cuda.nccl", name)
    return value if value is not None else ctx.env.get(env_name)


def _rank_opt(ctx, name: str, env_name: str) -> Optional[int]:
    """A whole-number option (a rank, a world size), or None; a bad value is a plain usage error."""
    value = _opt(ctx, name, env_name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} (or {env_name}) must be a whole number, not {value!r}") from None


def _world_size(ctx, vis: Visibility, backend: str, asked: Optional[int] = None) -> tuple[int, str]:
    """How many ranks to start, and why that many."""
    if asked is not None:
        return asked, f"world_size {asked} was asked for"
    nproc = expectation(ctx, "cuda.nccl").nproc
    if nproc:
        return nproc, f"the launch asks for --nproc_per_node {nproc}"
    from dfdoctor.diagnose.pg_backend import uses_nccl  # start-up: see the note at the imports
    if not uses_nccl(backend):
        return 2, "two CPU ranks for the gloo backend"
    n = len(vis.visible)
    shown = "" if vis.variable is None else f" with CUDA_VISIBLE_DEVICES={vis.variable}"
    return n, f"{n} GPU{'s' if n != 1 else ''} visible{shown}"


def _free_port(ctx) -> int:
    """A TCP port for the rendezvous: free here now for a local job; a random high one on a remote target.

    Locally it is drawn below the kernel's ephemeral range and bound once to see it free: a port from that range
    (what binding port 0 gives) is also what every outgoing connection here is handed, and under load one took
    it between our choice and rank 0's listen (EADDRINUSE; a port nobody binds explicitly stays free).
    """
    if not ctx.target.runs_here:
        return random.randint(20000, 59999)  # we cannot bind on the target; a clash shows as rank 0's error
    import socket  # start-up: see the note at the imports (a `check --target` imports it for nothing else)
    below = range(20000, max(20001, min(_ephemeral_low(), 32768)))
    for port in random.sample(below, min(20, len(below))):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("", port))
            return port
        except OSError:
            continue
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_taken(outcome: ProbeOutcome) -> bool:
    """Whether rank 0 could not listen on the rendezvous port because something else held it."""
    p = outcome.payload or {}
    err = str(p.get("error") or "")
    return p.get("failed_stage") == "rendezvous" and ("EADDRINUSE" in err or "address already in use" in err.lower())


def _run_ranks(ctx, layout: Layout, backend: str, faults: tuple[Optional[int], Optional[int]],
               timeout: float) -> tuple[list[ProbeOutcome], list[int]]:
    """Start this node's ranks at once and wait for all of them; and the ports found taken on the way.

    Where dfdoctor chose the port here, something else may take it before rank 0 listens: that is our race, not a
    fact about the job, so the group is formed again on another port (twice at most, inside the same budget).
    """
    ours = layout.port is None and ctx.target.runs_here
    end = time.monotonic() + timeout
    taken: list[int] = []
    while True:
        port = layout.port or _free_port(ctx)
        with tempfile.TemporaryDirectory(prefix="dfdoctor-nccl-") if ours else contextlib.nullcontext() as signals:
            outcomes = _run_group(ctx, layout, backend, faults, port, end - time.monotonic(), signals)
        if not (ours and outcomes and _port_taken(outcomes[0])):
            return outcomes, taken
        taken.append(port)
        if len(taken) == 3 or end - time.monotonic() < 10:
            return outcomes, taken


def _run_group(ctx, layout: Layout, backend: str, faults: tuple[Optional[int], Optional[int]], port: int,
               timeout: float, signals: Optional[str]) -> list[ProbeOutcome]:
    """Start this node's ranks at once, each its own killable process group, and wait for all of them.

    A rank that fails says so through the store, and the others stop waiting then (see the probe), so only a
    rank that hangs makes the check wait for its deadline. Rank 0 that cannot open the store says so in the
    `signals` folder (here only), which the others read while they wait to connect.
    """
    outcomes: list[Optional[ProbeOutcome]] = [None] * layout.local
    # On this machine the probe shares our clock: it counts its budget from now, not from when it started
    sent_at = {"DFDOCTOR_NCCL_SENT_AT": f"{time.time():.3f}"} if ctx.target.runs_here else {}
    here = {"DFDOCTOR_NCCL_SIGNALS": signals} if signals else {}

    def one(local: int) -> None:
        rank = layout.first + local
        env = probe_env(ctx, {"RANK": str(rank), "WORLD_SIZE": str(layout.world), "LOCAL_RANK": str(local),
                              "LOCAL_WORLD_SIZE": str(layout.local), "MASTER_ADDR": layout.master,
                              "MASTER_PORT": str(port),
                              "DFDOCTOR_NCCL_BACKEND": backend, "DFDOCTOR_NCCL_BUDGET": f"{timeout:.1f}",
                              **sent_at, **here,
                              "DFDOCTOR_NCCL_HANG": "1" if rank == faults[0] else "0",
                              "DFDOCTOR_NCCL_FAIL": "1" if rank == faults[1] else "0",
                              **layout.node_env()})
        outcomes[local] = run_probe(ctx, "cuda_nccl_probe.py", [f"--rank={rank}"], timeout=timeout, env=env,
                                    preload=("torch",))  # every rank imports it: once, in a probe server here

    threads = [threading.Thread(target=one, args=(r,), name=f"rank{r}", daemon=True) for r in range(layout.local)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [o for o in outcomes if o is not None]


def _visible_gpus(ctx) -> tuple[Visibility, ProbeOutcome]:
    """The GPUs the job would see, asked where the job runs (a fast probe that imports no torch)."""
    out = run_probe(ctx, "cuda_nccl_probe.py", ["--list-gpus"], timeout=LIST_TIMEOUT_S, env=probe_env(ctx))
    p = out.payload or {}
    return parse_visible(p.get("cuda_visible_devices"), p.get("gpus") or []), out


def _rank_view(rank: int, out: ProbeOutcome, vis: Visibility, layout: Layout) -> dict:
    """One rank's story: ok, error (it reported), waited (a timeout waiting for others), hung or died."""
    p = out.payload or {}
    local = rank - layout.first
    gpu = vis.visible[local] if local < len(vis.visible) else None
    view = {"rank": rank, "node": layout.node_of(rank), "gpu": gpu, "stage": p.get("stage", "start"),
            "stages": p.get("stages"),
            "duration_s": round(out.duration_s, 3), "all_reduce": p.get("all_reduce"), "device": p.get("gpu"),
            "nccl": p.get("nccl"), "env": p.get("env"), "injected_hang": p.get("injected_hang", False),
            "injected_fail": p.get("injected_fail", False), "unreachable": p.get("unreachable"),
            "never_joined": p.get("never_joined"), "reach": p.get("reach")}
    if p.get("error"):
        err = p["error"]
        # a rank that could not reach rank 0's store at all failed on its own (an observed network fact), though its
        # TCPStore only said "timed out"
        waited = not p.get("unreachable") and (p.get("waited_for") is not None or (
            any(w in err.lower() for w in _WAITING) and p.get("failed_stage") in (
                "rendezvous", "waiting for the other ranks", "init_process_group")))
        view.update(state="waited" if waited else "error", error=err, stage=p.get("failed_stage"),
                    waited_for=p.get("waited_for"),
                    traceback=(p.get("traceback") or "").strip().splitlines()[-6:])
    elif out.timed_out:
        view.update(state="hung", stack=stack_excerpt(out.stderr, 30))
    elif p.get("stage") == "done":
        view.update(state="ok" if p.get("correct") else "wrong")
    else:
        how = f"signal {out.signal}" if out.signal else f"exit status {out.returncode}"
        view.update(state="died", error=f"died with {how}", stderr=out.stderr.strip().splitlines()[-8:])
    return view


def _label(r: dict) -> str:
    """'rank 1 (GPU 1)'; 'rank 3 (n2, GPU 1)' in a group over several nodes."""
    where = [w for w in (r.get("node"), f"GPU {r['gpu']}" if r.get("gpu") is not None else None) if w]
    return f"rank {r['rank']}" + (f" ({', '.join(where)})" if where else "")


def _verdict(ranks: list[dict], layout: Layout, backend: str, limit: float, data: dict) -> Result:
    """Name the culprit ranks: those that failed on their own, else the hung ones at the earliest stage."""
    world = layout.world
    said = data.get("nccl") or {}
    lines = ((f"backend {backend}: {said['backend_why']}",) if said.get("backend_why") else ()) + \
        tuple(f"port {p} was taken by another program between dfdoctor's choice and rank 0's listen: the group was "
              f"formed again on another port" for p in said.get("ports_taken") or ()) + \
        tuple(_rank_line(r) for r in ranks)
    bad = [r for r in ranks if r["state"] in ("error", "died", "wrong")]
    hung = [r for r in ranks if r["state"] == "hung"]
    waited = [r for r in ranks if r["state"] == "waited"]
    if bad:
        first = bad[0]
        what = first.get("error") or _wrong(first)
        names = ", ".join(_label(r) for r in bad)
        rest = [r for r in ranks if r not in bad and r["state"] != "ok"]
        tail = f"; {', '.join(_label(r) for r in rest)} stopped waiting for {'it' if len(bad) == 1 else 'them'}" \
            if rest else ""
        return fail(f"{names} failed in {first['stage']}{_injected(first, 'fail')}: {what}{tail}",
                    causes.NCCL_FAILED,
                    evidence=lines + tuple(first.get("traceback") or first.get("stderr") or ()), data=data,
                    fix=_fix(first, said.get("backend_why") or "", said.get("backend_option")))
    if hung:
        earliest = min(_order(r["stage"]) for r in hung)
        culprits = [r for r in hung if _order(r["stage"]) == earliest]
        others = [r for r in ranks if r not in culprits and r["state"] != "ok"]
        names = ", ".join(_label(r) for r in culprits)
        stage = culprits[0]["stage"]
        it = "it" if len(culprits) == 1 else "them"
        tail = f"; {', '.join(_label(r) for r in others)} waited for {it}" if others else ""
        if len(culprits) == len(ranks):
            summary = f"all {world} ranks hung in {stage} after {limit:.0f} s"
        else:
            summary = f"{names} hung in stage '{stage}'{_injected(culprits[0], 'hang')}{tail}"
        stack = culprits[0].get("stack") or []
        frame = innermost_frame(stack)
        return fail(summary, causes.NCCL_HANG, data=data,
                    evidence=lines + ((f"{_label(culprits[0])} stuck at {frame}",) if frame else ()) + tuple(stack),
                    details="the hung rank was killed at the deadline with its whole process group; "
                            "nothing is left running",
                    fix="look at the named rank's stack; for an NCCL hang rerun with NCCL_DEBUG=INFO and check "
                        "the GPUs' links (nvidia-smi topo -m), NCCL_P2P_DISABLE/NCCL_IB_DISABLE and the firewall")
    if waited:
        names = ", ".join(_label(r) for r in waited)
        absent = _never_joined(waited, layout)
        if absent:
            # The store here listened all along and heard nothing from those nodes: each of them reports why itself
            # (a rank that cannot reach the store, one that never started, a hang), and fails there.
            return warn(f"{names} waited in vain for {absent}: none of {'its' if ',' not in absent else 'their'} "
                        f"ranks joined rank 0's store at {layout.master}:{layout.port}", causes.RANK_MISSING,
                        evidence=lines, data=data, fix=f"see the report of {absent}: it says why")
        elsewhere = _failed_elsewhere(waited, layout)
        if elsewhere:
            # Observed here only as a consequence: the node at fault reports the failure itself.
            return warn(f"{names} stopped waiting because {elsewhere} failed", causes.NCCL_FAILED,
                        evidence=lines, data=data, fix=f"see the report of {elsewhere.split(' on ')[-1]}")
        missing = sorted({m for r in waited for m in r.get("waited_for") or ()})
        whose = _on_nodes(missing, layout) + _refused(waited, layout)
        return fail(f"{names} timed out waiting for the other ranks{whose}", causes.NCCL_HANG, evidence=lines,
                    data=data, fix="a rank never arrived: see each rank's stage above")
    secs = max((r.get("all_reduce") or {}).get("seconds", 0) for r in ranks)
    init_s = max(_stage_time(r, "all_reduce") - _stage_time(r, "init_process_group") for r in ranks)
    nccl = next((r["nccl"] for r in ranks if r.get("nccl")), None)
    span = f" on {len(layout.step.nodes)} nodes ({', '.join(layout.step.nodes)})" if layout.step else ""
    mine = f"; ranks {layout.first}-{layout.first + layout.local - 1} here" if layout.step else ""
    return ok(f"{backend}{' ' + nccl if nccl else ''}: {world} ranks{span} formed a group in {init_s:.2f} s, "
              f"all-reduced the right sum ({ranks[0]['all_reduce']['expected']:g}) in {secs * 1000:.1f} ms and "
              f"passed a barrier{mine}", evidence=lines, data=data)


def _failed_elsewhere(waited: list[dict], layout: Layout) -> str:
    """'rank 3 on n2' when these ranks stopped waiting only because ranks of other nodes said they failed."""
    if layout.step is None:
        return ""
    others = sorted({m for r in waited for m in r.get("waited_for") or ()})
    said_failed = all("stopped waiting:" in (r.get("error") or "") for r in waited)
    if not others or not said_failed or any(layout.first <= m < layout.first + layout.local for m in others):
        return ""
    return ", ".join(f"rank {m} on {layout.node_of(m)}" for m in others)


def _never_joined(waited: list[dict], layout: Layout) -> str:
    """'node n2' when every waiting rank here waited only for other nodes whose ranks never joined the store."""
    if layout.step is None or not all(r.get("never_joined") for r in waited):
        return ""
    here = layout.step.nodes[layout.step.index]
    nodes = sorted({n for r in waited for n in r["never_joined"]})
    return "" if here in nodes else f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"


def _refused(waited: list[dict], layout: Layout) -> str:
    """': 10.0.0.1:29500 (n1) refused every connection ...' when the ranks' own TCP tries were all refused: the
    node answered, so this is no network fact; rank 0 never listened there."""
    reach = [r.get("reach") or {} for r in waited if r.get("stage") == "rendezvous"]
    if not reach or len(reach) < len(waited) or any(set(x.get("outcomes") or ()) != {"refused"} for x in reach):
        return ""
    head = f" ({layout.step.nodes[0]})" if layout.step else ""
    return (f": {reach[0].get('addr')}:{reach[0].get('port')}{head} refused every connection: the node answers, but "
            f"rank 0's store never listened there")


def _on_nodes(missing: list[int], layout: Layout) -> str:
    """' (rank 2, 3 on n2)' for ranks that never came, in a group over several nodes."""
    if layout.step is None or not missing:
        return ""
    by_node: dict[str, list[str]] = {}
    for m in missing:
        by_node.setdefault(str(layout.node_of(m)), []).append(str(m))
    return " (" + "; ".join(f"rank {', '.join(ms)} on {n}" for n, ms in by_node.items()) + ")"


def _injected(r: dict, kind: str) -> str:
    """' (injected by ...)' when this rank's fault was asked for, so nobody mistakes a drill for a finding."""
    return f" (injected by DFDOCTOR_NCCL_{kind.upper()}_RANK)" if r.get(f"injected_{kind}") else ""


def _order(stage: str) -> int:
    """Position of a stage in a rank's life, for finding the rank that got least far."""
    return STAGES.index(stage) if stage in STAGES else len(STAGES)


def _stage_time(r: dict, name: str) -> float:
    """When a rank entered a stage (seconds after it started), 0 if it never did."""
    return next((t for s, t in r.get("stages") or [] if s == name), 0.0)


def _wrong(r: dict) -> str:
    """The wrong all-reduce result, as a sentence."""
    a = r.get("all_reduce") or {}
    return f"all_reduce gave values {a.get('min')}..{a.get('max')}, expected {a.get('expected')}"


def _rank_line(r: dict) -> str:
    """Evidence: one line per rank."""
    extra = r.get("error") or (_wrong(r) if r["state"] == "wrong" else "")
    when = "(not started: known from the torch build)" if r.get("started") is False else \
        f"after {r['duration_s']:.1f} s"
    line = f"{_label(r)}: {r['state']} at stage '{r['stage']}' {when}"
    return f"{line}: {extra}" if extra else line


def _fix(r: dict, backend_why: str = "", option: Optional[str] = None) -> str:
    """What to do about a rank that failed on its own (`backend_why`: where the job sets its backend; `option`:
    the job's own command-line option that sets it, which its script was seen to read)."""
    err = (r.get("error") or "").lower()
    if r.get("unreachable"):
        u = r["unreachable"]
        there = f"{u.get('node')} ({u.get('addr')})" if u.get("node") else str(u.get("addr"))
        here = f" from {r['node']}" if r.get("node") else ""
        return (f"open TCP port {u.get('port')} on {there} to connections{here} (not tried: dfdoctor changes no "
                f"firewall). It is the rendezvous port (a torchrun's MASTER_PORT; under --slurm-nodes it follows the "
                f"job and step ids), and gloo and NCCL then connect on more ports between the nodes: allow TCP "
                f"between the job's nodes. `python3 -c \"import socket; socket.create_connection(('{u.get('addr')}', "
                f"{u.get('port')}), 3)\"` on {r.get('node') or 'this node'} while the job runs shows whether it "
                f"gets through")
    if "unable to find address for" in err or "bootstrap : no socket interface found" in err:
        return ("the network interface this rank was told to use does not exist on its node: check "
                "GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME there (`ip -br link` lists the node's interfaces)")
    if "address already in use" in err or "eaddrinuse" in err:
        return ("rank 0's rendezvous port (named in the error) is taken on its node: run again (over a Slurm "
                "allocation the port follows the job and step ids, so the next step gets another)")
    if "different numbers of ranks" in err:
        return ("make every node start as many ranks: the same number of visible GPUs on each (a node with one "
                "fewer has lost a GPU: nvidia-smi there), or the same --nproc_per_node / world_size")
    if "cpu-only torch" in err or "nccl built in" in err:
        where = backend_why.removeprefix("the job's: ") if backend_why.startswith("the job's: ") else ""
        how = f"where the job sets it ({where})" if where else "where the job sets it (init_process_group's backend)"
        if option:
            how = f"by adding {option}=gloo to the command ({where}; not tried)"
        return (f"this torch has no CUDA, so no NCCL group can form here: run the ranks with the gloo backend on "
                f"CPUs, {how}, or install a CUDA build of torch on a machine with GPUs")
    if "torch sees" in err or "invalid device ordinal" in err or "no cuda gpus" in err:
        return "start no more ranks than visible GPUs (torchrun --nproc_per_node), and check CUDA_VISIBLE_DEVICES"
    if r["state"] == "wrong":
        return "a wrong all-reduce means corrupted transfers: rerun with NCCL_P2P_DISABLE=1 to test the GPU links"
    return "rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT) to see why this rank could not join"
