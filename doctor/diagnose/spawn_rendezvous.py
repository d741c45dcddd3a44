"""A job started without torchrun (pytorch/examples' imagenet style: `mp.spawn` one process per device, each
calling `init_process_group(init_method=args.dist_url, world_size=..., rank=...)`) whose processes wait in the
rendezvous at a `tcp://HOST:PORT` its options set: `rank-missing`, in the project's terms.

Without torchrun no RANK or WORLD_SIZE is in the processes' environment, so diagnose/stuck.py cannot tell which
rank waits for which; what is known is the command's own options: the URL (given, or the option's default), the
world size and the node's rank. Two shapes, told apart by what is seen on this machine: the rendezvous store
listens here (this node is rank 0 and the other nodes never connected), or nothing here listens at that port and
the address is not this machine's (the processes retry connecting to an address nobody serves: a default URL
never changed, an unreachable node).
"""

from __future__ import annotations

import re
import socket
from typing import Optional
from urllib.parse import urlsplit

from dfdoctor import causes
from dfdoctor.model import Verdict

_TCP_FRAMES = ("_tcp_rendezvous_handler", "TCPStore", "_create_c10d_store")
_LOCAL = {"127.0.0.1", "localhost", "0.0.0.0", "::1", ""}
_PG_TIMEOUT_MIN = 30  # init_process_group's default timeout for gloo (NCCL's is 10 min)


def spawn_rendezvous_wait(run, live, ctx) -> Optional[Verdict]:
    """Processes of a job not under torchrun that wait in init_process_group's tcp:// rendezvous."""
    if live is None or not ctx.local:
        return None
    retry = _retrying(run)
    if live.growing and not retry:
        return None
    argv = list(run.spec.get("argv") or [])
    if any(a.endswith(("torchrun", "accelerate")) or a == "torch.distributed.run" for a in argv[:4]):
        return None  # torchrun's own rendezvous: diagnose/elastic.py
    waiting = [st for st in live.stacks if "init_process_group" in st.text and
               any(f in st.text for f in _TCP_FRAMES)]
    if not waiting and not retry:  # a growing log is not looked into: its retry lines are the evidence then
        return None
    # imported only now: a live job that shows no such wait (every running one) never needs the project model
    from dfdoctor.diagnose import user_terms  # start-up: read for a fix alone (issue 45)
    proj = user_terms.project_of(ctx)
    if proj is None:
        return None
    url_opt = next((o for o in proj.options.options if str(proj.given(o) or o.default or "").startswith("tcp://")),
                   None)
    if url_opt is None:
        return None
    given = proj.given(url_opt)
    url = given or str(url_opt.default)
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    said = [f"{url_opt.flag} {url}" + ("" if given else f" (its default, {url_opt.where})")]
    world, rank = _said(proj, "world_size", said), _said(proj, "rank", said)
    pids = ", ".join(str(st.pid) for st in waiting)
    who = f"pid {pids}" if pids else "the job's process"
    evidence = [f"pid {st.pid} waits in init_process_group ({_frame(st.text)})" for st in waiting] + \
        ([f"its output: {retry}"] if retry else []) + [f"the command's rendezvous: {', '.join(said)}"]
    # the store runs here: its port listens, at an address of this machine, and no process retries connecting
    serving = port is not None and not retry and (host in _LOCAL or _is_mine(host)) and _listening(port)
    if serving:
        evidence.append(f"port {port} listens on this machine: the rendezvous store runs here")
        summary = (f"The job waits in init_process_group at the rendezvous {url} ({url_opt.flag}): "
                   f"{world[1] if world else 'the world size'} asks for more processes than have joined. Only this "
                   f"node's {len(waiting)} process(es) (pid {pids}{', ' + rank[1] if rank else ''}) reached it; no "
                   f"other node has connected. init_process_group gives up after {_PG_TIMEOUT_MIN} min by default.")
        others = f"with {rank[0].flag} 1 (and so on for each node)" if rank else "with its own node rank"
        fix = (f"Start the same command on the other node {others} and a {url_opt.flag} that node can reach (this "
               f"machine's address, not {host})" if host in _LOCAL else
               f"Start the same command on the other node {others} and the same {url_opt.flag} {url}")
        fix += (f"; or, on one node, give {world[0].flag} 1" if world else "") + " (not tried)."
        return Verdict("failed", causes.RANK_MISSING, summary, fix, evidence + live.notes)
    if not retry and (host in _LOCAL or _is_mine(host)):
        return None  # the store is to start here (rank 0 is still on its way): nothing seen is wrong yet
    evidence.append(f"{host} is not this machine's address, and the job's processes retry connecting to it" if
                    retry else f"nothing on this machine listens at port {port}, and {host} is not this machine's "
                    "address")
    summary = (f"The job waits in init_process_group to reach the rendezvous at {url} ({url_opt.flag}"
               + ("" if given else f", its default at {url_opt.where}") + f"), where nothing answers: {who} "
               f"retries until init_process_group's timeout ({_PG_TIMEOUT_MIN} min by default).")
    fix = (f"Give {url_opt.flag} the address of the node that runs rank 0 (tcp://HOST:PORT, reachable from here); "
           f"on one machine, {url_opt.spelled('tcp://127.0.0.1:23456')}"
           + (f" with {rank[0].flag} 0" if rank else "") + " (not tried).")
    return Verdict("failed", causes.RANK_MISSING, summary, fix, evidence + live.notes)


def _retrying(run) -> str:
    """The output grows only with TCPStore's connect retries (`TCP client failed to connect/validate to host`):
    a log that grows is no progress when this is all it says. The last such line, or ""."""
    tail = run.stream("stderr", 1 << 16)[-8192:]  # each retry's warning comes with a C++ stack of ~40 frames
    lines = [ln for ln in tail.splitlines() if "TCPStore" in ln and "failed to conn" in ln]
    if not lines or run.stream("stdout", 1 << 16).strip():
        return ""
    return re.sub(r"^\[\w[\d ]+[\d:.]+ ", "[", lines[-1].strip())[:300]


def _said(proj, name: str, said: list) -> Optional[tuple]:
    """(option, "--world-size 2") for the option named `name` (or ending so), noting it in `said`."""
    option = proj.option(name) or proj.options.ending(name)
    if option is None:
        return None
    value = proj.given(option)
    text = f"{option.flag} {value}" if value is not None else f"{option.flag} {option.default!r} (its default)"
    said.append(text)
    return option, text


def _frame(text: str) -> str:
    """The job's own frame that called init_process_group (the line above it in the dump), else that frame."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("init_process_group") and i + 1 < len(lines):
            rest = [x for x in lines[i + 1:] if "site-packages" not in x and "torch/" not in x]
            return f"called from {rest[0]}" if rest else ln
    return "init_process_group"


def _listening(port: int) -> bool:
    """A socket listens on this port on this machine (/proc/net/tcp and tcp6, state 0A)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def _is_mine(host: str) -> bool:
    """The host names an address of this machine."""
    try:
        theirs = {ai[4][0] for ai in socket.getaddrinfo(host, None)} if not re.fullmatch(r"[\d.]+", host) else {host}
        mine = {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return False
    return bool(theirs & (mine | _LOCAL))
