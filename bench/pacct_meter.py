"""Whole-machine CPU meter for a full test run (issue 45): BSD process accounting of every process that exits
(containers' and Slurm's too: the workers' cgroups of bench/test_cpu.py miss them), by process name, plus the /proc
deltas of processes alive at both ends. Needs root.

    python3 bench/pacct_meter.py start DIR; CI=true .ci/run; python3 bench/pacct_meter.py stop DIR
    python3 bench/pacct_meter.py report DIR
"""
import collections
import ctypes
import json
import os
import struct
import sys

def procs():
    out = {}
    tck = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = open(f"/proc/{d}/stat").read()
            comm = s[s.index("(") + 1:s.rindex(")")]
            f = s[s.rindex(")") + 2:].split()
            out[d] = (comm, f[19], (int(f[11]) + int(f[12])) / tck)  # starttime, utime+stime
        except (OSError, ValueError):
            pass
    return out

def comp(v):
    """A comp_t (13-bit mantissa, 3-bit base-8 exponent) in clock ticks."""
    return (v & 0x1fff) << (3 * ((v >> 13) & 7))

def accounting_on():
    """Whether some run's accounting is already on: acct(2) would silently move it to our file (it is
    machine-wide), so look whether a process's exit grows any pacct file under /tmp or /work (the kernel says
    nowhere else where accounting goes)."""
    import glob
    import subprocess
    files = glob.glob("/tmp/**/pacct", recursive=True) + glob.glob("/work/*/pacct") + glob.glob("/work/*/*/pacct")
    sizes = {f: os.path.getsize(f) for f in files}
    subprocess.run(["true"])  # its record is written before wait() returns
    return [f for f in files if os.path.exists(f) and os.path.getsize(f) != sizes[f]]

def main():
    cmd, out = sys.argv[1], sys.argv[2]
    libc = ctypes.CDLL(None, use_errno=True)
    if cmd == "start":
        on = accounting_on()
        assert not on, f"accounting is already on, into {on}: leave it to the run that started it"
        os.makedirs(out, exist_ok=True)
        open(f"{out}/pacct", "wb").close()
        json.dump(procs(), open(f"{out}/before.json", "w"))
        assert libc.acct(f"{out}/pacct".encode()) == 0, os.strerror(ctypes.get_errno())
        return
    if cmd == "stop":
        libc.acct(None)
        json.dump(procs(), open(f"{out}/after.json", "w"))
        return
    data = open(f"{out}/pacct", "rb").read()
    by = collections.defaultdict(lambda: [0.0, 0])
    for i in range(0, len(data) - 63, 64):
        r = data[i:i + 64]
        (flag, ver, tty, code, uid, gid, pid, ppid, btime, etime, ut, st) = struct.unpack("<BBHIIIIIIfHH", r[:36])
        comm = r[48:64].split(b"\0")[0].decode(errors="replace")
        cpu = (comp(ut) + comp(st)) / 100.0
        by[comm][0] += cpu
        by[comm][1] += 1
    before, after = json.load(open(f"{out}/before.json")), json.load(open(f"{out}/after.json"))
    alive = collections.defaultdict(float)
    for pid, (comm, start, cpu) in after.items():
        b = before.get(pid)
        alive[comm] += cpu - (b[2] if b and b[1] == start else 0.0)
    total_exited = sum(v[0] for v in by.values())
    total_alive = sum(alive.values())
    print(f"exited processes: {total_exited:.1f} CPU-s in {sum(v[1] for v in by.values())} processes")
    for comm, (cpu, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:35]:
        print(f"  {cpu:8.1f} {n:6d}  {comm}")
    print(f"alive at the end (delta): {total_alive:.1f} CPU-s")
    for comm, cpu in sorted(alive.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {cpu:8.1f}  {comm}")

main()
