"""CPU and minor page faults of one probe forked from an interpreter that imported torch, as the probe server
runs it (`run_child` of checks/probes/_probe_server.py), for two versions of the server module side by side,
alternated in one process (issue 45, round 23). Minor faults count the copy-on-write pages a fork touched: load
does not change them.

    .venv/bin/python bench/probe_fork_cost.py OLD_SERVER.py NEW_SERVER.py PROBE [--dynamo] [-n N] [-- ARG...]
    (OLD_SERVER.py: e.g. `git show main:checks/probes/_probe_server.py > /tmp/old.py`)
"""
import argparse
import importlib.util
import os
import sys


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def once(server, script, args):
    """One fork running `script`: (CPU seconds, minor faults, wait status, what it printed)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        server.run_child({"argv": [script, *args], "cwd": os.path.dirname(script), "env": dict(os.environ)},
                         w, os.dup(w), [])
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    return ru.ru_utime + ru.ru_stime, ru.ru_minflt, status, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("probe")
    p.add_argument("--dynamo", action="store_true", help="import torch._dynamo too (compile.race's preload)")
    p.add_argument("-n", type=int, default=10)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a, probe_args = p.parse_args(argv[:cut]), argv[cut + 1:]
    versions = {"old": load("old_server", a.old), "new": load("new_server", a.new)}
    importlib.import_module("torch")  # what the server imports before it forks torch's probes
    if a.dynamo:
        importlib.import_module("torch._dynamo")
    runs = {name: [] for name in versions}
    for _ in range(a.n):
        for name, server in versions.items():
            runs[name].append(once(server, os.path.abspath(a.probe), probe_args))
    for name, v in runs.items():
        cpu, faults = sorted(x[0] for x in v), sorted(x[1] for x in v)
        print(f"{name}: median {1000 * cpu[len(cpu) // 2]:6.1f} ms CPU, {faults[len(faults) // 2]:6d} minor faults, "
              f"wait statuses {sorted(set(x[2] for x in v))}")


if __name__ == "__main__":
    main()
