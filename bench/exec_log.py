"""What each exited process ran, beside bench/pacct_meter.py (issue 45, round 22): process accounting records a
command name and CPU per process, not its command line, and a target's `python3` is dfdoctor's agent, a probe,
a test's job or another worktree's run alike. This logs every exec on the machine (the kernel's proc connector:
containers' and Slurm's too) with its command line, and joins it to pacct_meter's records by pid. Needs root.

    python3 bench/exec_log.py watch DIR & python3 bench/pacct_meter.py start DIR
    ...; python3 bench/pacct_meter.py stop DIR; kill %1
    python3 bench/exec_log.py report DIR [COMM]     (COMM: python3 unless given)
"""
import collections
import json
import os
import socket
import struct
import sys
import time


def watch(out_dir):
    """Log each exec (pid, command line, names of its parents) to OUT_DIR/exec.jsonl until killed."""
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
        if struct.unpack_from("=I", data, 36)[0] != 2:  # PROC_EVENT_EXEC
            continue
        pid, tgid = struct.unpack_from("=II", data, 52)
        if pid == tgid:
            cmd = _read(f"/proc/{pid}/cmdline").decode(errors="replace").split("\0")[:-1]
            out.write(json.dumps({"t": time.time(), "pid": pid, "cmd": cmd[:12], "chain": _chain(pid)}) + "\n")


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
        return "(forked, no exec seen)"
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
    return " ".join(cmd[:3])[:90]


def report(out_dir, comm="python3"):
    """CPU and count of the exited processes named `comm`, by what they ran."""
    ran = {}
    for line in open(os.path.join(out_dir, "exec.jsonl")):
        e = json.loads(line)
        if "pid" in e:
            ran[e["pid"]] = e["cmd"]
    data = open(os.path.join(out_dir, "pacct"), "rb").read()
    by = collections.defaultdict(lambda: [0.0, 0])
    for i in range(0, len(data) - 63, 64):  # struct acct_v3, as pacct_meter reads it
        r = data[i:i + 64]
        if r[48:64].split(b"\0")[0].decode(errors="replace") != comm:
            continue
        pid = struct.unpack_from("<I", r, 16)[0]
        ut, st = struct.unpack_from("<HH", r, 32)
        k = kind(ran.get(pid))
        by[k][0] += (_comp(ut) + _comp(st)) / 100.0
        by[k][1] += 1
    total, n = sum(v[0] for v in by.values()), sum(v[1] for v in by.values())
    print(f"{comm}: {total:.2f} CPU-s in {n} processes")
    for k, (cpu, count) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        print(f"  {cpu:8.2f} {count:6d} {1000 * cpu / count:7.1f} ms  {k}")


def _comp(v):
    """A comp_t (13-bit mantissa, 3-bit base-8 exponent) in clock ticks."""
    return (v & 0x1fff) << (3 * ((v >> 13) & 7))


if __name__ == "__main__":
    if sys.argv[1] == "watch":
        os.makedirs(sys.argv[2], exist_ok=True)
        watch(sys.argv[2])
    else:
        report(sys.argv[2], *sys.argv[3:])
