"""Reading a torchrun (torch.distributed.elastic) failure: which rank failed first, how it ended, and its own
exception, from the "Root Cause (first observed failure)" table, the per-rank error file that `@record` writes,
and the `[rankN]:` lines torch.distributed prints for each rank's traceback.

`python -m torch.distributed.run` and `accelerate launch` (which runs the same agent) print the same table.
"""

from __future__ import annotations

import json
import re
import signal as _signal
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.diagnose.traceback import (RANK_PREFIX, PyError, parse_python_error, rank_output,
                                         ranks_with_traceback)
from dfdoctor.lazy_re import compile_later

ROOT_CAUSE = "Root Cause (first observed failure):"
FAILURES = "Failures:"
AGENT_FAILED = compile_later(r"elastic/multiprocessing/api\.py:\d+\] failed \(exitcode")
FIELD = compile_later(r"^\s{2}(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s?(?P<value>.*)$")


@dataclass
class RankFailure:
    """One row of torchrun's failure table."""

    rank: Optional[int] = None
    local_rank: Optional[int] = None
    host: Optional[str] = None
    exitcode: Optional[int] = None
    pid: Optional[int] = None
    error_file: Optional[str] = None
    traceback: list[str] = field(default_factory=list)

    @property
    def signal(self) -> Optional[str]:
        """The signal that ended the rank (torchrun writes it as a negative exit code)."""
        if self.exitcode is None or self.exitcode >= 0:
            return None
        try:
            return _signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"

    @property
    def how(self) -> str:
        """`exit code 1` or `signal SIGKILL`."""
        if self.signal:
            return f"signal {self.signal}"
        return f"exit code {self.exitcode}" if self.exitcode is not None else "an unknown exit"

    @property
    def who(self) -> str:
        """`rank 1 (local rank 1, pid 42, host h)`."""
        bits = [f"local rank {self.local_rank}" if self.local_rank is not None else None,
                f"pid {self.pid}" if self.pid else None, f"host {self.host}" if self.host else None]
        inner = ", ".join(b for b in bits if b)
        return f"rank {self.rank}" + (f" ({inner})" if inner else "")


def root_cause(text: str) -> Optional[RankFailure]:
    """The row under torchrun's "Root Cause (first observed failure)", or None when the output has none."""
    at = text.rfind(ROOT_CAUSE)
    return _rows(text[at + len(ROOT_CAUSE):])[0] if at >= 0 else None


def other_failures(text: str) -> list[RankFailure]:
    """The rows under torchrun's "Failures:" (the ranks it saw fail after the root cause, or that it ended)."""
    at, end = text.rfind(FAILURES), text.rfind(ROOT_CAUSE)
    return [r for r in _rows(text[at + len(FAILURES):end]) if r.rank is not None] if 0 <= at < end else []


def _rows(text: str) -> list[RankFailure]:
    """The `[N]:` rows of one section of torchrun's table, up to the section's end."""
    rows = [RankFailure()]
    key = None
    for line in text.splitlines()[1:]:
        if line.startswith(("=====", "-----")):
            break
        if re.match(r"^\[\d+\]:\s*$", line):
            if rows[-1].rank is not None:
                rows.append(RankFailure())
            continue
        m = FIELD.match(line)
        if m:
            key, value = m["key"], m["value"].strip()
            _set(rows[-1], key, value)
        elif key == "traceback" and line.startswith("  ") and line.strip():
            rows[-1].traceback.append(line[2:])
    return rows


# A collective that failed because another rank went away first: the rank that printed it is a casualty, not the
# cause (gloo: "Connection closed by peer ... typically caused by a remote worker crashing"; NCCL: "remote process
# exited or there was a network error").
PEER_GONE = compile_later(r"Connection closed by peer|Connection reset by peer|remote worker crash|"
                          r"remote process exited|Broken pipe|NCCL communicator was aborted")


def behind_a_casualty(text: str, row: Optional[RankFailure], err: Optional[PyError]
                      ) -> Optional[tuple[RankFailure, PyError, str]]:
    """When the rank torchrun saw fail first only lost its peer, the rank that raised an error of its own:
    its row (from torchrun's "Failures:"), its exception and where that was read. None when there is none."""
    if row is None or err is None or not PEER_GONE.search(err.headline + "\n" + "\n".join(err.after)):
        return None
    for other in other_failures(text):
        if other.rank == row.rank:
            continue
        own = parse_python_error(rank_output(text, other.rank))
        if own and not PEER_GONE.search(own.headline + "\n" + "\n".join(own.after)):
            return other, own, f"{_FROM_RANK_LINES}{other.rank}] lines of the output"
    return None


def _set(row: RankFailure, key: str, value: str) -> None:
    """Fill one field of a row from its text."""
    if key == "rank":
        m = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", value)
        if m:
            row.rank, row.local_rank = int(m.group(1)), int(m.group(2)) if m.group(2) else None
    elif key == "exitcode":
        m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", value)
        if m:
            row.exitcode, row.pid = int(m.group(1)), int(m.group(2)) if m.group(2) else None
    elif key == "host":
        row.host = value
    elif key == "error_file":
        row.error_file = None if value in ("<N/A>", "") else value
    elif key == "traceback":
        if value.startswith("Traceback"):
            row.traceback.append(value)


_FROM_ERROR_FILE, _FROM_RANK_LINES = "its error file", "the [rank"  # how a source read from the rank itself begins


def from_the_rank(source: str) -> bool:
    """Whether rank_error read the exception from the rank itself (its error file or its [rankN] lines), not from
    the last unprefixed traceback, which could be another process's."""
    return source.startswith((_FROM_ERROR_FILE, _FROM_RANK_LINES))


def rank_error(text: str, row: Optional[RankFailure]) -> tuple[Optional[PyError], str]:
    """The failing rank's own exception and where it was read: its error file (`@record`), the traceback in
    torchrun's table, or the `[rankN]:` lines of the output."""
    if row is not None and row.error_file:
        err = _from_error_file(row.error_file)
        if err:
            return err, f"{_FROM_ERROR_FILE} {row.error_file}"
    if row is not None and row.traceback:
        err = parse_python_error("\n".join(row.traceback))
        if err:
            return err, "torchrun's failure table"
    ranks = [row.rank] if row is not None and row.rank is not None else ranks_with_traceback(text)[:1]
    for rank in ranks:
        err = parse_python_error(rank_output(text, rank))
        if err:
            return err, f"{_FROM_RANK_LINES}{rank}] lines of the output"
    # A rank that fails before init_process_group (set_device on a missing GPU, say) prints its traceback
    # without the [rankN] prefix: then it is the last traceback before the agent's own.
    err = parse_python_error(before_agent(text))
    if err and err.file and "torch/distributed/elastic" not in err.file:
        return err, "the last traceback before torchrun's report (printed without a rank prefix)"
    return None, ""


def before_agent(text: str) -> str:
    """The output before torchrun's own failure report (its "failed (exitcode" log line or its traceback)."""
    lines = text.splitlines()
    cut = len(lines)
    for i, line in enumerate(lines):
        if AGENT_FAILED.search(line):
            cut = i
            break
    else:
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].startswith("Traceback (most recent call last):"):
                if any("ChildFailedError" in l for l in lines[i:i + 60]):
                    cut = i
                break
    return "\n".join(l for l in lines[:cut] if not RANK_PREFIX.match(l))


def _from_error_file(path: str) -> Optional[PyError]:
    """The exception `@record` wrote for a rank: {"message": {"message": "...", "extraInfo": {"py_callstack"}}}."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    msg = data.get("message") if isinstance(data, dict) else None
    if isinstance(msg, dict):
        stack = (msg.get("extraInfo") or {}).get("py_callstack") or ""
        return parse_python_error(stack) or parse_python_error(f"Traceback (most recent call last):\n"
                                                               f"{msg.get('message', '')}")
    return None


def is_elastic(text: str) -> bool:
    """The output is that of a torchrun agent whose workers failed."""
    return ROOT_CAUSE in text or "ChildFailedError" in text


# ---- a torchrun waiting in its rendezvous ----------------------------------------------------------------
RDZV_FRAMES = ("elastic/rendezvous/", "next_rendezvous", "_rendezvous (")
STANDALONE_ENDPOINT = "localhost:0"  # torch's run.py under --standalone: the port is a free one it picks
RDZV_DEFAULT_TIMEOUT_S = 600  # torch's join_timeout (dynamic) and timeout (static) when --rdzv-conf sets none
_TORCHRUN_OPTS = ("nnodes", "rdzv_backend", "rdzv_endpoint", "rdzv_conf", "master_addr", "master_port", "node_rank",
                  "rdzv_id", "nproc_per_node", "standalone")


def torchrun_options(argv: list[str]) -> dict[str, str]:
    """torchrun's own options (dashes and underscores alike, `--x=v` or `--x v`), up to the script it runs: after
    the agent's own word (`torchrun`, or `python -m torch.distributed.run`, whose `-m` is the interpreter's)."""
    out: dict[str, str] = {}
    i = next((n + 1 for n, a in enumerate(argv[:4]) if a.endswith("torchrun") or a == "torch.distributed.run"), 0)
    while i < len(argv):
        word = argv[i]
        if word.endswith(".py") or word in ("-m", "--module"):
            break
        m = re.fullmatch(r"--([\w-]+)(?:=(.*))?", word)
        if m:
            name = m.group(1).replace("-", "_")
            if name in _TORCHRUN_OPTS:
                if m.group(2) is not None or name == "standalone":
                    out[name] = m.group(2) if m.group(2) is not None else ""
                elif i + 1 < len(argv):
                    out[name] = argv[i + 1]
                    i += 1
        i += 1
    return out


class Asked(dict):
    """What torchrun was asked (option -> value, as torchrun_options names them), and which of them its PET_
    environment gave (option -> variable): the words say where to change each."""

    def __init__(self, opts=(), from_env: Optional[dict] = None):
        super().__init__(opts)
        self.from_env = dict(from_env or {})


def torchrun_asked(argv: list[str], env: Optional[dict] = None) -> Asked:
    """What torchrun was asked: its options (torchrun_options), and for each option not on its command line its
    PET_ environment variable (torch's run.py reads `PET_` + the option's name for every option, the command line
    taking precedence: a rendezvous can be configured by environment only). `--standalone` is a flag there:
    PET_STANDALONE=1 sets it."""
    out = Asked(torchrun_options(argv))
    for name in _TORCHRUN_OPTS:
        var = f"PET_{name.upper()}"
        value = (env or {}).get(var)
        if name in out or value is None:
            continue
        if name != "standalone":
            out[name], out.from_env[name] = value, var
        elif value.strip().isdigit() and int(value):
            out[name], out.from_env[name] = "", var
    return out


def standalone(opts: dict[str, str]) -> bool:
    """torchrun runs with --standalone (or PET_STANDALONE=1): torch's run.py then makes its rendezvous c10d at
    localhost:0 (a free port it picks) under a fresh uuid as --rdzv-id, whatever --rdzv-backend, --rdzv-endpoint
    and --rdzv-id say; --nnodes it leaves as asked (torch 2.13, run.py's run())."""
    return "standalone" in opts


def via(opts: dict[str, str], name: str) -> str:
    """` (from PET_NNODES)` where the option's value came from torchrun's PET_ environment, else nothing."""
    var = getattr(opts, "from_env", {}).get(name)
    return f" (from {var})" if var else ""


def is_agent(argv: list[str]) -> bool:
    """The command is torchrun's (or `python -m torch.distributed.run`'s) agent."""
    return any(a.endswith("torchrun") or a == "torch.distributed.run" for a in argv[:4])


def endpoint_of(opts: dict[str, str]) -> tuple[str, str]:
    """(rendezvous backend, endpoint) as torchrun reads them from what it was asked (torchrun_asked: its options,
    else its PET_ environment variables), else torch's defaults (static at --master-addr:--master-port,
    127.0.0.1:29500; c10d's port 29400)."""

    def given(name: str) -> str:
        return opts.get(name) or ""

    if standalone(opts):
        return "c10d", STANDALONE_ENDPOINT
    backend = given("rdzv_backend") or "static"
    endpoint = given("rdzv_endpoint") or f"{given('master_addr') or '127.0.0.1'}:{given('master_port') or '29500'}"
    if ":" not in endpoint.rsplit("]", 1)[-1]:
        endpoint += ":29400" if backend == "c10d" else ":29500"
    return backend, endpoint


@dataclass
class _Asked:
    """What torchrun's launch line asks of its rendezvous, and how long it has waited by now."""

    nnodes: str
    least: str
    backend: str
    endpoint: str
    key: str  # the --rdzv-conf setting of its limit: timeout (static) or join_timeout (dynamic)
    timeout: int
    waited: float
    left: float
    standalone: bool = False

    @property
    def setting(self) -> str:
        return f"--rdzv-conf {self.key}=SECONDS"

    def place(self, endpoint: Optional[str] = None) -> str:
        """Where it waits: `H:P (c10d rendezvous)`; under --standalone its own store, which no node can reach."""
        if self.standalone:
            return ("localhost, on a free port it picked (the c10d rendezvous of --standalone, under a fresh "
                    "--rdzv-id: no other node can join it)")
        return f"{endpoint or self.endpoint} ({self.backend} rendezvous)"

    def store(self, endpoint: Optional[str] = None) -> str:
        """The rendezvous a connection is looked for at, in the words of the evidence."""
        return "its rendezvous store on localhost (--standalone)" if self.standalone else \
            f"its rendezvous endpoint {endpoint or self.endpoint}"

    def launch_line(self, opts: dict[str, str]) -> str:
        """The options the reading rests on, each said with the PET_ variable it came from where it did."""
        conf = (f", rdzv conf {opts['rdzv_conf']}{via(opts, 'rdzv_conf')}" if opts.get("rdzv_conf") else
                f" ({self.key} not set: torch's default {RDZV_DEFAULT_TIMEOUT_S} s)")
        return f"the launch line: --nnodes={self.nnodes}{via(opts, 'nnodes')}, {self._rendezvous(opts)}{conf}"

    def _rendezvous(self, opts: dict[str, str]) -> str:
        if not self.standalone:
            return (f"rdzv backend {self.backend}{via(opts, 'rdzv_backend')}, endpoint {self.endpoint}"
                    f"{_endpoint_via(opts)}")
        ignored = [f"--{n.replace('_', '-')}={opts[n]}{via(opts, n)}" for n in ("rdzv_backend", "rdzv_endpoint",
                                                                                "rdzv_id") if opts.get(n)]
        return (f"--standalone{via(opts, 'standalone')}: rdzv backend c10d, endpoint {STANDALONE_ENDPOINT} (a "
                "free port torchrun picks), a fresh rdzv id" + (f" ({', '.join(ignored)} ignored under "
                                                               "--standalone)" if ignored else ""))

    def fix(self, opts: dict[str, str]) -> str:
        """In the words of the rendezvous the launch line uses: the static one (torchrun's default) meets at
        --master-addr:--master-port, each node giving its own --node-rank, unless --rdzv-endpoint is given (torch's
        run.py, get_rdzv_endpoint); c10d and the other dynamic ones at --rdzv-endpoint, under one --rdzv-id;
        --standalone's at a port of localhost that no other node can reach. An option that came from a PET_
        variable is said with it: that is where to change it."""
        if self.standalone:
            return self._standalone_fix(opts)
        nodes = f"the other node{'s' if self.least != '2' else ''}"
        if self.backend == "static" and not opts.get("rdzv_endpoint"):
            host, _, port = self.endpoint.rpartition(":")
            start = (f"Start the same torchrun line on {nodes}, {self._node_ranks(opts)}, and the same "
                     f"--master-addr={host}{_set_by(opts, 'master_addr')} (reachable from there: not 127.0.0.1 or "
                     f"localhost) and --master-port={port}{_set_by(opts, 'master_port')}")
        else:
            start = (f"Start the same torchrun line on {nodes}, with the same --rdzv-endpoint={self.endpoint}"
                     f"{_set_by(opts, 'rdzv_endpoint')} (reachable from there: not 127.0.0.1 or localhost) and the "
                     f"same --rdzv-id{_set_by(opts, 'rdzv_id')}")
        return (f"{start}; or, for one node, run with {self._one_node(opts)}. The wait's limit is "
                f"{self.setting}{_set_by(opts, 'rdzv_conf')} (not tried).")

    def _standalone_fix(self, opts: dict[str, str]) -> str:
        """--standalone is one node's rendezvous (torch's run.py: localhost:0, a fresh --rdzv-id), yet --nnodes
        asks for more: one node drops the count, several nodes drop --standalone and meet at one endpoint."""
        drop = " (unset PET_STANDALONE, which sets it here)" if "standalone" in getattr(opts, "from_env", {}) else ""
        return (f"--standalone makes a rendezvous only this node can join, and --nnodes={self.nnodes} asks for "
                f"{self.least} nodes. For one node, run with {self._one_node(opts)}; for {self.least} nodes, drop "
                f"--standalone{drop} and start the same line on every node with --rdzv-backend=c10d, the same "
                "--rdzv-endpoint=HOST:PORT (an address of one of them that the others reach: not 127.0.0.1 or "
                f"localhost) and the same --rdzv-id. The wait's limit is {self.setting}{_set_by(opts, 'rdzv_conf')} "
                "(not tried).")

    def _one_node(self, opts: dict[str, str]) -> str:
        """--nnodes=1, and the PET_NNODES that gave this launch its count where it did (the command line wins)."""
        var = getattr(opts, "from_env", {}).get("nnodes")
        return "--nnodes=1" + (f" (or set {var}=1: --nnodes={self.nnodes} came from it)" if var else "")

    def _node_ranks(self, opts: dict[str, str]) -> str:
        """The --node-rank each other node gives (static rendezvous: one rank per node), this node's (its
        --node-rank, 0 where not given) said beside them."""
        mine = opts.get("node_rank", "0")
        if not self.least.isdigit() or not mine.isdigit() or int(self.least) > 8:
            return f"each with its own --node-rank (one of 0 to N-1 for N nodes; this node's is {mine})"
        others = [str(r) for r in range(int(self.least)) if str(r) != mine]
        if len(others) == 1:
            return f"with --node-rank={others[0]} (this node's is {mine})"
        return f"each with its own --node-rank ({', '.join(others[:-1])} and {others[-1]}; this node's is {mine})"


def _endpoint_via(opts: dict[str, str]) -> str:
    """The PET_ variables the endpoint came from: --rdzv-endpoint's, else --master-addr's and --master-port's."""
    names = ("rdzv_endpoint",) if opts.get("rdzv_endpoint") else ("master_addr", "master_port")
    found = [getattr(opts, "from_env", {})[n] for n in names if n in getattr(opts, "from_env", {})]
    return f" (from {' and '.join(found)})" if found else ""


def _set_by(opts: dict[str, str], name: str) -> str:
    """` (set by PET_RDZV_ENDPOINT here)` in a fix, where the option came from that variable."""
    var = getattr(opts, "from_env", {}).get(name)
    return f" (set by {var} here)" if var else ""


def _asked(run, live, opts: dict[str, str]) -> Optional[_Asked]:
    """The rendezvous the launch line asks for, None when it asks for one node (nothing to wait for)."""
    nnodes = opts.get("nnodes", "1")
    if nnodes.split(":")[-1] in ("", "1"):
        return None
    backend, endpoint = endpoint_of(opts)
    conf = dict(kv.split("=", 1) for kv in opts.get("rdzv_conf", "").split(",") if "=" in kv)
    key = "timeout" if backend == "static" else "join_timeout"
    timeout = int(conf[key]) if conf.get(key, "").isdigit() else RDZV_DEFAULT_TIMEOUT_S
    spawned_t = float((run.spawned or {}).get("t") or live.observed_at)
    waited = max(0.0, live.observed_at - spawned_t)
    return _Asked(nnodes, nnodes.split(":")[0], backend, endpoint, key, timeout, waited, max(0.0, timeout - waited),
                  standalone(opts))


def rendezvous_wait(run, live) -> Optional[Verdict]:
    """torchrun (or `python -m torch.distributed.run`) alive and silent in its rendezvous, its stacks say so: it
    waits for nodes that have not joined. Name how many it asks for, where it waits, and how long it will."""
    if live is None:
        return None
    argv = list(run.spec.get("argv") or [])
    if not is_agent(argv):
        return None
    opts = _asked_of_agent(live) or torchrun_options(argv)
    ask = _asked(run, live, opts)
    if ask is None:
        return None
    if not any(st.tool == "py-spy" and st.text for st in live.stacks):
        return rendezvous_wait_seen_by_kernel(run, live, opts, ask)
    waiting = [st for st in live.stacks if any(f in _main_thread(st.text) for f in RDZV_FRAMES)]
    # only torchrun itself, its main thread in the rendezvous: the ranks of a started job (each its own process)
    # are judged by their own stacks (diagnose/stuck.py)
    if not waiting or len(live.stacks) != len(waiting):
        return None
    least = ask.least
    joined = "1 of 2 nodes has joined (this one)" if least == "2" else \
        f"this node has joined, and {least} are needed" if least.isdigit() else "this node has joined"
    lines = [line.strip() for st in waiting for line in st.text.splitlines() if "(" in line]
    frame = next((l for l in lines if "next_rendezvous" in l), next((l for l in lines if "rendezvous" in l), ""))
    summary = (f"torchrun waits in its rendezvous for nodes that have not come: --nnodes={ask.nnodes} asks for "
               f"{least} node{'s' if least != '1' else ''}, and {joined}. It waits at {ask.place()} and gives up after "
               f"{ask.timeout} s ({ask.left:.0f} s from now).")
    evidence = [ask.launch_line(opts),
                f"waiting for {ask.waited:.0f} s; no rank has started on this node (torchrun is its only process)",
                *([f"it waits in {frame}"] if frame else [])]
    return Verdict("failed", causes.RANK_MISSING, summary, ask.fix(opts), evidence + live.notes)


def _asked_of_agent(live) -> Optional[dict[str, str]]:
    """What the job's torchrun agent was asked, its PET_ environment read beside its command line where its
    process was looked at (here from /proc, on a target from the named variables its agent sends)."""
    return next((s.asked for s in live.job or [] if s.asked is not None), None)


def rendezvous_wait_seen_by_kernel(run, live, opts: dict[str, str], ask: _Asked) -> Optional[Verdict]:
    """The same wait where no Python stack was read (no py-spy, or one that may not attach): torchrun is the
    job's only process in every look (no rank started on this node) and the kernel shows it holding a connection
    to the rendezvous endpoint its own command line names. Nothing progresses there: it polls its store for nodes
    that have not come. What the kernel cannot show (how many nodes joined, when the rendezvous began) is said
    not established. Where its sockets could not be read, that is said too, and no failure is claimed."""
    alive = [s for s in live.job if not s.gone]
    if len(alive) != 1 or not is_agent(alive[0].cmdline) or len(alive[0].looks) < 2:
        return None
    agent = alive[0]
    if agent.on_endpoint is False:
        return None  # no connection there: it is somewhere else than its rendezvous (connecting, resolving)
    least, endpoint = ask.least, agent.endpoint or ask.endpoint
    common = (f"--nnodes={ask.nnodes} asks for {least} node{'s' if least != '1' else ''}, and no rank has started "
              f"on this node; how many have joined is not established (seen from the kernel: no Python stack was "
              f"read).")
    evidence = [ask.launch_line(opts),
                f"no rank has started on this node: {agent.name()} is the job's only process in every look; "
                f"{ask.waited:.0f} s since torchrun started (when its rendezvous began is not established)",
                f"{agent.name()} waits in the kernel: {_kernel_words(agent)}"]
    if agent.on_endpoint is None:
        summary = (f"torchrun (pid {agent.pid}) is alive and silent: {common} Its "
                   f"rendezvous endpoint is {ask.place(endpoint)}; a connection to it is not "
                   f"established (its sockets could not be read), nor any progress.")
        evidence.append(f"a connection to {ask.store(endpoint)}: not established (its sockets could "
                        f"not be read)")
        return Verdict("unknown", None, summary, ask.fix(opts), evidence + live.notes)
    summary = (f"torchrun waits in its rendezvous for nodes that have not come: {common} It waits at "
               f"{ask.place(endpoint)} and gives up after {ask.timeout} s (not before {ask.left:.0f} s from "
               f"now).")
    evidence.insert(1, f"{agent.name()} holds a connection to {ask.store(endpoint)} (its sockets, "
                       "read from the kernel)")
    return Verdict("failed", causes.RANK_MISSING, summary, ask.fix(opts), evidence + live.notes)


def _kernel_words(s) -> str:
    """The agent's last kernel wait, and the CPU it spent between the looks."""
    cpu = s.cpu_spent()
    return s.last.kernel.words() + (f"; {cpu:.2f} s of CPU between the looks" if cpu is not None else "")


def _main_thread(text: str) -> str:
    """The main thread's frames in a py-spy dump (all of it when the dump names no threads)."""
    m = re.search(r'^Thread [^\n]*"MainThread"\n((?:[ \t]+\S[^\n]*\n?)*)', text, re.M)
    return m.group(1) if m else ("" if "Thread " in text else text)
