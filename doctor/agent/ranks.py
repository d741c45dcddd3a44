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


def is_torchrun(cmd):
    """Whether a command line runs torchrun's agent: the program itself (`torchrun`, or a Python running the
    `torchrun` console script or `-m torch.distributed.run`/`.launch`), not a word that only contains the name
    (a job in ~/torchrun-exp/ or `--note torchrun` was read as an agent, and its launch never said running)."""
    return any(os.path.basename(w) == "torchrun" or w in TORCHRUN for w in program(cmd))


def program(cmd):
    """The words of a command line that name what runs: its first, and a Python interpreter's script or module."""
    words = list(cmd[:1])
    if not words or not os.path.basename(words[0]).startswith("python"):
        return words
    i = 1
    while i < len(cmd):
        a = cmd[i]
        if a.startswith("-c"):  # -c CMD, -cCMD: no script
            return words
        if a == "-m" or (a.startswith("-m") and len(a) > 2):
            return words + (cmd[i + 1:i + 2] if a == "-m" else [a[2:]])
        if a in ("-X", "-W"):  # an option with its value in the next word
            i += 2
            continue
        if a == "--" or not a.startswith("-"):
            return words + cmd[i + (a == "--"):i + 1 + (a == "--")]
        i += 1
    return words


def nproc(cmd):
    """`--nproc_per_node N` of a torchrun command line (1 without it); None when not torchrun or not a number."""
    if not is_torchrun(cmd):
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
