"""Processes of a job not under torchrun waiting in init_process_group's env:// rendezvous for processes that
nothing starts: Lightning's DDP on one machine with `--trainer.num_nodes=2` (the world size counts a second node
that was never started), or any trainer whose world size is larger than the processes started here.

What is seen: every waiting process's stack (init_process_group, `_env_rendezvous_handler`), and the world size
the job itself said (Lightning prints `Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2`) or, failing that,
the product of its node and device options. The options that set it are named as the command gave them; when the
processes a node runs cannot be read, the world size is said not established (never counted as one a node).
"""

from __future__ import annotations

from typing import Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.lazy_re import compile_later

_MEMBER = compile_later(r"MEMBER: (\d+)/(\d+)")
_PG_TIMEOUT_MIN = 30  # init_process_group's default timeout for gloo (NCCL's is 10 min)


def env_rendezvous_wait(run, live, ctx) -> Optional[Verdict]:
    """rank-missing for processes waiting at an env:// rendezvous for more processes than were started here."""
    if live is None or not ctx.local or live.growing:
        return None
    argv = list(run.spec.get("argv") or [])
    if any(a.endswith(("torchrun", "accelerate")) or a == "torch.distributed.run" for a in argv[:4]):
        return None  # torchrun's own rendezvous: diagnose/elastic.py
    waiting = [st for st in live.stacks if "init_process_group" in st.text and "_env_rendezvous_handler" in st.text]
    if not waiting:
        return None
    # imported only now: a live job that shows no such wait (every running one) never needs the project model
    from dfdoctor.diagnose import user_terms  # start-up: read for a fix alone (issue 45)
    proj = user_terms.project_of(ctx)
    nodes = _option(proj, "num_nodes") if proj else None
    devices = _option(proj, "devices") if proj else None
    printed = _MEMBER.findall(run.stream("stdout", 1 << 16) + run.stream("stderr", 1 << 16))
    world = int(printed[-1][1]) if printed else _product(nodes, devices)
    if world is None:
        return _world_unknown(waiting, nodes, devices, live)
    if world <= len(waiting):
        return None
    missing = world - len(waiting)
    pids = ", ".join(str(st.pid) for st in waiting)
    set_by = " x ".join(o[1] for o in (nodes, devices) if o) if nodes else ""
    evidence = _waits(waiting)
    evidence += [f"the job said: MEMBER: {printed[-1][0]}/{printed[-1][1]}"] if printed else []
    evidence += [f"the world size's options: {set_by}"] if set_by else []
    summary = (f"The job waits in init_process_group for {missing} more process(es) that nothing starts: its world "
               f"size is {world}" + (f" ({set_by})" if set_by else "") + f", and {len(waiting)} process(es) "
               f"started on this machine (pid {pids}) wait at the env:// rendezvous. init_process_group gives up "
               f"after {_PG_TIMEOUT_MIN} min by default.")
    if nodes:
        fix = (f"On one machine, give {nodes[0].spelled('1')}" + (f" (more processes here: {devices[0].flag})"
                                                                 if devices else "") +
               f"; for {world // max(1, len(waiting))} nodes, run the same command on each other node with its own "
               "NODE_RANK (1, 2, ...) and MASTER_ADDR set to this machine's address (not tried).")
    else:
        fix = (f"Start the other {missing} process(es) (each with its own rank, the same MASTER_ADDR and "
               "MASTER_PORT), or ask for a world size of the processes started here (not tried).")
    return Verdict("failed", causes.RANK_MISSING, summary, fix, evidence + live.notes)


def _waits(waiting) -> list[str]:
    return [f"pid {st.pid} waits in init_process_group (env:// rendezvous, MASTER_ADDR/MASTER_PORT)"
            for st in waiting]


def _world_unknown(waiting, nodes, devices, live) -> Optional[Verdict]:
    """More than one node asked for and only this one started, with the count of processes per node unread (no
    device option the source shows a number for, and no MEMBER line printed): the nodes that never started are
    named, the world size is said not established, never counted with one process a node."""
    count = nodes[2] if nodes else None
    if count is None or not str(count).isdigit() or int(count) <= 1:
        return None  # one node: the processes it waits for are this node's own, and how many is not known
    pids = ", ".join(str(st.pid) for st in waiting)
    per_node = (f"{devices[0].flag} is {devices[2]!r}, not a number" if devices else
                "the project has no device option the source shows")
    summary = (f"The job waits in init_process_group for processes of {int(count) - 1} more node(s) that nothing "
               f"starts: {nodes[1]} asks for {count} nodes, and only this machine's {len(waiting)} process(es) "
               f"(pid {pids}) wait at the env:// rendezvous. Its world size was not established: how many "
               f"processes a node runs was not read ({per_node}, and the job printed no MEMBER: line). "
               f"init_process_group gives up after {_PG_TIMEOUT_MIN} min by default.")
    fix = (f"On one machine, give {nodes[0].spelled('1')}; for {count} nodes, run the same command on each other "
           "node with its own NODE_RANK (1, 2, ...) and MASTER_ADDR set to this machine's address (not tried).")
    evidence = _waits(waiting) + [f"the node count's option: {nodes[1]}",
                                  f"processes per node: not established ({per_node})"]
    return Verdict("failed", causes.RANK_MISSING, summary, fix, evidence + live.notes)


def _option(proj, name: str) -> Optional[tuple]:
    """(option, `--trainer.num_nodes=2`, its value) as the command gives it, or with its default."""
    option = proj.option(name) or proj.options.ending(name)
    if option is None:
        return None
    words, given = proj.words_of(option), proj.given(option)
    if not words and option.default is None:
        return None  # neither given nor a default the source shows: not said
    return option, " ".join(words) if words else f"{option.flag} {option.default!r} (its default)", \
        given if given is not None else option.default


def _product(nodes, devices) -> Optional[int]:
    """num_nodes x devices when both are whole numbers the command or the source gives; None when either is not
    read (a project without a device option may run any number of processes a node: never counted as one)."""
    values = [str(nodes[2]) if nodes else None, str(devices[2]) if devices else None]
    return int(values[0]) * int(values[1]) if all(v and v.isdigit() for v in values) else None
