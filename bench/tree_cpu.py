"""Own CPU of every process a command leaves behind, its detached ones included: runs COMMAND as a subreaper's
child, so the detached flight recorder and its stand-in come back to us when the launch exits, and reads each
process's own utime + stime from /proc/PID/stat while it is a zombie (waitid WNOWAIT), before reaping it. What a
process reaped itself (the recorder its job, the launch its check workers) is in that process's children's CPU,
printed apart. Labels come from cmdlines seen while the processes lived (polled every 20 ms).

    python3 bench/tree_cpu.py [--json OUT] -- COMMAND...
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _label(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    return text or None


def run(argv: list[str]) -> list[dict]:
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    seen: dict[int, dict] = {}
    me = os.getpid()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) in seen:
                    continue
                pid = int(name)
                chain, p = [], pid
                while p and p != me and len(chain) < 32:  # ours when an ancestor is us
                    f = _stat(p)
                    if f is None:
                        break
                    chain.append(p)
                    p = int(f[1])
                if p == me and pid not in seen:
                    label = _label(pid)
                    if label:
                        f = _stat(pid)
                        seen[pid] = {"pid": pid, "ppid": int(f[1]) if f else None, "cmd": label}
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    top = subprocess.Popen(argv)
    out = []
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            break
        pid = info.si_pid
        f = _stat(pid)
        row = dict(seen.get(pid, {"pid": pid, "cmd": "?"}))
        if f:
            row.update(own_s=(int(f[11]) + int(f[12])) / TICK, children_s=(int(f[13]) + int(f[14])) / TICK)
        os.waitpid(pid, 0)
        row["top"] = pid == top.pid
        out.append(row)
    done.set()
    return out


def main(argv: list[str]) -> int:
    dest = None
    if argv[:1] == ["--json"]:
        dest, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    rows = run(argv)
    for r in rows:
        print(f"own {r.get('own_s', 0):6.2f} s  children {r.get('children_s', 0):6.2f} s  pid {r['pid']:7d}  "
              f"{'TOP ' if r['top'] else ''}{r['cmd'][:150]}", file=sys.stderr)
    if dest:
        with open(dest, "w") as fh:
            json.dump(rows, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
