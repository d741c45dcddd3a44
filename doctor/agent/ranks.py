"""On a target, beside `target_agent.py` (standard library, Python 3.6+): torchrun's agent in a job's tree, how
many local ranks it was asked for, and each rank alive now, looked at once. dfdoctor.watch.settle decides from
this, as it does from this machine's /proc for a local job, whether every rank is alive and past
init_process_group before it says "running".
"""

import os

TORCHRUN = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
# torchrun takes all four spellings; plain string tests, so that the only patterns in the agent are its masking rules
NPROC_FLAGS = ("--nproc_per_node", "--nproc-per-node", "--nproc_per-node", "--nproc-per_node")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def nproc(cmd):
    """`--nproc_per_node N` of a torchrun command line (1 without it); None when not torchrun or not a number."""
    if not any(t in " ".join(cmd) for t in TORCHRUN):
        return None
    for i, a in enumerate(cmd):
        flag, eq, value = a.partition("=")
        if flag in NPROC_FLAGS:
            if not eq:
                value = cmd[i + 1] if i + 1 < len(cmd) else ""
            return int(value) if value.isdigit() else None
    return 1


def ranks(pids, look):
    """{"agent": pid, "want": N, "procs": [...]} for the first torchrun agent among `pids` (the job's tree,
    parents first), each rank it started described as target_agent.sample does and looked at once with
    `look(pid)`; None when the job has no torchrun agent."""
    agent = want = None
    for p in pids:
        n = nproc([c for c in _read("/proc/%d/cmdline" % p).split("\0") if c])
        if n is not None:
            agent, want = p, n
            break
    if agent is None:
        return None
    procs = []
    for p in pids:
        st = _read("/proc/%d/stat" % p).rsplit(")", 1)
        try:
            ppid = int(st[1].split()[1])
        except (IndexError, ValueError):
            continue
        env = dict(e.split("=", 1) for e in _read("/proc/%d/environ" % p).split("\0") if "=" in e)
        if ppid != agent or "RANK" not in env or "LOCAL_RANK" not in env:
            continue
        cmd = [c for c in _read("/proc/%d/cmdline" % p).split("\0") if c]
        try:
            exe = os.path.basename(os.readlink("/proc/%d/exe" % p))
        except OSError:
            exe = os.path.basename(cmd[0]) if cmd else ""
        procs.append({"pid": p, "ppid": ppid, "cmdline": cmd, "python": "python" in exe,
                      "env": {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE") if k in env},
                      "looks": [look(p)]})
    return {"agent": agent, "want": want, "procs": procs}
