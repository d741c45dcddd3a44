"""What each exited process ran, beside bench/pacct_meter.py (issue 45, rounds 22-23): process accounting records a
command name and CPU per process, not its command line, and a target's `python3` is dfdoctor's agent, a probe,
a test's job or another worktree's run alike; a venv `python` that forked and never exec'd is a probe server's
child, a recorder daemon, a DataLoader worker alike. This logs every exec and every fork of a process (not of a
thread) on the machine (the kernel's proc connector: containers' and Slurm's too) with its command line (a fork's:
its parent's) and the names of its parents, and joins them to pacct_meter's records by pid. Needs root.

    python3 bench/exec_log.py watch DIR & python3 bench/pacct_meter.py start DIR
    ...; python3 bench/pacct_meter.py stop DIR; kill %1
    python3 bench/exec_log.py report DIR [COMM [ONLY]]
        COMM: python3 unless given; ONLY: count only processes whose command line or parent's holds ONLY
        (a worktree's path, when other runs share the machine)

A record joins the last event for its pid between its start and its exit (pids are reused: 32768 of them here,
~100 processes a second in a full run), so a process that forked and then exec'd reads as its exec, one that
never exec'd as "(fork of <its parent's command>)".
"""
import bisect
import collections
import json
import os
import re
import socket
import struct
import sys
import time

FORK, EXEC = 1, 2  # enum proc_cn_event
AFORK = 0x01  # acct_v3's ac_flag: forked, never exec'd


def watch(out_dir):
    """Log each exec and process fork to OUT_DIR/exec.jsonl until killed."""
    out = open(os.path.join(out_dir, "exec.jsonl"), "a", buffering=1)
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 11)  # NETLINK_CONNECTOR
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((os.getpid(), 1))  # CN_IDX_PROC
    listen = struct.pack("=IIIIHH", 1, 1, 0, 0, 4, 0) + struct.pack("=I", 1)  # cn_msg + PROC_CN_MCAST_LISTEN
    s.send(struct.pack("=IHHII", 16 + len(listen), 3, 0, 0, os.getpid()) + listen)
    while True:
        try:
            data = s.recv(65536)
        except OSError:  # ENOBUFS: a burst overran the buffer; say so, go on
            out.write('{"lost": 1}\n')
            continue
        what = struct.unpack_from("=I", data, 36)[0]
        if what == EXEC:
            pid, tgid = struct.unpack_from("=II", data, 52)
            if pid == tgid:
                out.write(json.dumps({"t": time.time(), "pid": pid, "cmd": _cmd(pid), "chain": _chain(pid)}) + "\n")
        elif what == FORK:
            ppid, ptgid, pid, tgid = struct.unpack_from("=IIII", data, 52)
            if pid == tgid:  # a process, not a thread
                # The child's command line is its parent's (same memory until it execs); read the parent's, or
                # the child's when the parent is already gone.
                cmd = _cmd(ptgid) or _cmd(pid)
                out.write(json.dumps({"t": time.time(), "pid": pid, "fork": ptgid, "cmd": cmd,
                                      "chain": _chain(ptgid)}) + "\n")


def _cmd(pid):
    return _read(f"/proc/{pid}/cmdline").decode(errors="replace").split("\0")[:-1][:12]


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _chain(pid):
    """The command names of the process and its parents, nearest first (up to 6)."""
    names = []
    for _ in range(6):
        st = _read(f"/proc/{pid}/stat").decode(errors="replace")
        if not st:
            break
        names.append(st[st.index("(") + 1:st.rindex(")")])
        pid = int(st[st.rindex(")") + 2:].split()[1])
        if pid <= 1:
            break
    return names


def kind(cmd):
    """What a command line runs, in a few words: dfdoctor's agent part, a probe, or its first words."""
    if not cmd:
        return "(no exec or fork seen)"
    if "-c" in cmd[1:3]:
        i = cmd.index("-c")
        code = cmd[i + 1] if len(cmd) > i + 1 else ""
        if "The agent's one loader" in code:
            return "agent part " + (cmd[i + 2] if len(cmd) > i + 2 else "?")
        return "-c " + (code.strip().splitlines() or [""])[0][:60]
    if any(w.endswith("agent.pyz") for w in cmd):
        return "agent part recorder (agent.pyz)"
    for w in cmd[1:3]:
        if "/dfdoctor-probe-" in w:
            return "probe " + w.rsplit("/", 1)[1]
    # First words without their directories (a venv's path says nothing of what runs), up to the first option's
    # value: `dfdoctor launch`, `dfdoctor/agent recorder`, `pytest -q`.
    words = [os.path.basename(w) if w.startswith("/") and i < 2 else w for i, w in enumerate(cmd[:4])]
    return re.sub(r"/tmp/\S*", "/tmp/...", " ".join(words))[:90]  # a test's or a run's own folder: one line for all


def events(out_dir):
    """pid -> [(time, event)] in time order."""
    by = collections.defaultdict(list)
    for line in open(os.path.join(out_dir, "exec.jsonl")):
        e = json.loads(line)
        if "pid" in e:
            by[e["pid"]].append((e["t"], e))
    for v in by.values():
        v.sort(key=lambda te: te[0])
    return by


def join(evs, pid, btime, exit_t):
    """The last event of `pid` from its start (btime: whole seconds) to its exit, or None."""
    v = evs.get(pid, [])
    i = bisect.bisect_right([t for t, _ in v], exit_t + 1.0)  # btime is truncated: a second of slack each side
    if i and v[i - 1][0] >= btime - 1.0:
        return v[i - 1][1]
    return None


def label(e):
    if e is None:
        return "(no exec or fork seen)"
    if not e["cmd"]:  # it was gone, or a zombie, when the watcher looked (round 22's "forked, no exec seen")
        return f"(exec'd, command line not read: {e['chain'][0] if e['chain'] else '?'})"
    if "fork" in e:
        return f"(fork of {kind(e['cmd'])})"
    return kind(e["cmd"])


def report(out_dir, comm="python3", only=None):
    """CPU and count of the exited processes named `comm`, by what they ran (or forked from)."""
    evs = events(out_dir)
    data = open(os.path.join(out_dir, "pacct"), "rb").read()
    by = collections.defaultdict(lambda: [0.0, 0, collections.Counter()])
    for i in range(0, len(data) - 63, 64):  # struct acct_v3, as pacct_meter reads it
        r = data[i:i + 64]
        if r[48:64].split(b"\0")[0].decode(errors="replace") != comm:
            continue
        pid, ppid, btime, etime, ut, st = struct.unpack_from("<IIIfHH", r, 16)
        e = join(evs, pid, btime, btime + etime / 100.0)  # etime: clock ticks of AHZ = 100
        if e is None and r[0] & AFORK:
            # A log without fork events (round 23's first): the parent's command, from the record's ppid (the
            # process that reaped it: init or a subreaper where the parent went first, as a daemon's does)
            parent = join(evs, ppid, 0, btime + 1.0)
            e = parent and {**parent, "fork": ppid}
        if only and not (e and only in " ".join(e["cmd"])):
            continue
        k = label(e)
        by[k][0] += (_comp(ut) + _comp(st)) / 100.0
        by[k][1] += 1
        if e and "fork" in e:
            by[k][2][" < ".join(e["chain"][:4])] += 1
    total, n = sum(v[0] for v in by.values()), sum(v[1] for v in by.values())
    print(f"{comm}: {total:.2f} CPU-s in {n} processes")
    for k, (cpu, count, chains) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        print(f"  {cpu:8.2f} {count:6d} {1000 * cpu / count:7.1f} ms  {k}")
        for chain, c in chains.most_common(2):  # a fork's parent, grandparent...: who ran the forking command
            print(f"  {'':22s}{c:6d} under {chain}")


def _comp(v):
    """A comp_t (13-bit mantissa, 3-bit base-8 exponent) in clock ticks."""
    return (v & 0x1fff) << (3 * ((v >> 13) & 7))


if __name__ == "__main__":
    if sys.argv[1] == "watch":
        os.makedirs(sys.argv[2], exist_ok=True)
        watch(sys.argv[2])
    else:
        report(sys.argv[2], *sys.argv[3:])
