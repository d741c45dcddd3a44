"""`dfdoctor check` on 16 targets at once against the same check on one target alone.

Goal (issue #14): 16 targets in at most 2x the time of one. The targets are tests/infra's: the sshd on
127.0.0.1:47022, LXC containers 200 and 201 (directly and behind the `pct` shim over ssh) and the docker
container, under 16 different spellings, so the 16 rows do real work over every transport. Each target gets
the same job: `python3 train.py` in /tmp/dfd-bench (made here on the host, in both containers' root file systems
and in the docker container) with every pre-launch check dfdoctor runs by default.

    sudo tests/infra/provision.sh          # once (the test suite does it too)
    .venv/bin/python bench/fleet_speed.py [--repeat 2] [--parallel 16] [--out bench/results/fleet_speed.json]

"one target" is each kind measured alone; the ratio is taken against the slowest of them (the 16 cannot finish
before their slowest member) and also shown against the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

INFRA = Path(os.environ.get("DFDOCTOR_INFRA_DIR", "/var/lib/dfdoctor-infra"))
DFDOCTOR = str(Path(sys.executable).with_name("dfdoctor"))
CWD = "/tmp/dfd-bench"
CONTAINER = "dfdoctor-test"


def prepare() -> str:
    """The job's folder everywhere it will run; returns the docker container's short id (another spelling)."""
    for root in (Path("/"), Path("/var/lib/lxc/200/rootfs"), Path("/var/lib/lxc/201/rootfs")):
        d = root / CWD.lstrip("/")
        d.mkdir(parents=True, exist_ok=True)
        (d / "train.py").write_text("import json\nprint('step 0', flush=True)\n")
        d.chmod(0o777)
    subprocess.run(["docker", "exec", CONTAINER, "sh", "-c",
                    f"mkdir -p {CWD} && printf 'import json\\n' > {CWD}/train.py && chmod 777 {CWD}"], check=True)
    return subprocess.run(["docker", "inspect", "-f", "{{.Id}}", CONTAINER], capture_output=True, text=True,
                          check=True).stdout.strip()[:12]


def spellings(docker_id: str) -> list[str]:
    """16 specs: every transport, each host or container under more than one name."""
    return [
        "ssh://dfdoctor-host", "ssh://root@127.0.0.1:47022", "ssh://127.0.0.1:47022", "ssh://root@dfdoctor-host",
        "ssh://dfdoctor-host:47022",
        "pct://dfdoctor-host/200", "pct://root@127.0.0.1:47022/200", "pct://root@dfdoctor-host/200",
        "pct://dfdoctor-host/201", "pct://dfdoctor-host:47022/201",
        "lxc://200", "lxc://200/", "lxc://201",
        f"docker://{CONTAINER}", f"docker://{docker_id}", f"docker://{CONTAINER}/",
    ]


def machine_cpu_s() -> float:
    """CPU seconds every process of this machine has used (user + nice + system), from /proc/stat: the targets'
    side (sshd, lxc-attach, docker, the probes' interpreters) is not dfdoctor's child, so rusage misses it."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:4]
    return sum(int(x) for x in fields) / os.sysconf("SC_CLK_TCK")


def one_run(targets: list[str], parallel: int, out: Path, only: list[str], python: str = "python3") -> dict:
    argv = [DFDOCTOR, "check", *[a for t in targets for a in ("--target", t)], "--parallel", str(parallel),
            *[a for o in only for a in ("--only", o)], *(["--python", python] if python != "python3" else []),
            "--cwd", CWD, "--log", f"{CWD}/train.log", "--format", "json", "--output", str(out),
            "--", python, "train.py"]
    env = dict(os.environ, DFDOCTOR_SSH_CONFIG=str(INFRA / "ssh_config"), NO_COLOR="1")
    load = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    all0 = machine_cpu_s()
    started = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    took = time.monotonic() - started
    all1 = machine_cpu_s()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    doc = json.loads(out.read_text())
    rows = doc.get("targets") or [{"target": doc["target"], "verdict": doc["verdict"]}]
    return {"seconds": round(took, 2), "cpu_s": round(cpu, 2), "machine_cpu_s": round(all1 - all0, 2),
            "load_before": round(load, 1), "exit": p.returncode,
            "rows": {r["target"]: (r["verdict"]["state"], r["verdict"]["cause"]) for r in rows},
            "statuses": sorted({(c.get("target") or doc["target"], c["id"], c["status"]) for c in doc["checks"]
                                if c["status"] not in ("ok", "skip")})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--out", default="bench/results/fleet_speed.json")
    ap.add_argument("--python", default="python3",
                    help="the interpreter on every target (default python3: on this host's sshd that is a pyenv "
                         "shim, a bash script run for every probe; /usr/bin/python3 is the same everywhere)")
    ap.add_argument("--only", action="append", default=[],
                    help="check ids to run (repeatable; default: every default pre-launch check)")
    args = ap.parse_args()
    targets = spellings(prepare())
    tmp = Path("/tmp/dfd-bench-results")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    singles = {}
    for kind in ("ssh://dfdoctor-host", "pct://dfdoctor-host/200", "lxc://200", f"docker://{CONTAINER}"):
        runs = [one_run([kind], args.parallel, tmp / "one.json", args.only, args.python) for _ in range(args.repeat)]
        singles[kind] = {"seconds": [r["seconds"] for r in runs], "cpu_s": [r["cpu_s"] for r in runs],
                         "machine_cpu_s": [r["machine_cpu_s"] for r in runs],
                         "load_before": [r["load_before"] for r in runs], "median_s": statistics.median(
            r["seconds"] for r in runs), "verdict": runs[-1]["rows"], "problems": runs[-1]["statuses"]}
    many = [one_run(targets, args.parallel, tmp / "many.json", args.only, args.python) for _ in range(args.repeat)]
    slowest = max(s["median_s"] for s in singles.values())
    median_one = statistics.median(s["median_s"] for s in singles.values())
    many_s = statistics.median(r["seconds"] for r in many)
    result = {
        "command": " ".join(["python", "bench/fleet_speed.py", "--repeat", str(args.repeat), "--parallel",
                             str(args.parallel), *[a for o in args.only for a in ("--only", o)],
                             *(["--python", args.python] if args.python != "python3" else []), "--out", args.out]),
        "machine": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "python": platform.python_version()},
        "targets": targets, "checks": args.only or "every default pre-launch check",
        "one_target": singles,
        "sixteen_targets": {"seconds": [r["seconds"] for r in many], "cpu_s": [r["cpu_s"] for r in many],
                            "machine_cpu_s": [r["machine_cpu_s"] for r in many],
                            "load_before": [r["load_before"] for r in many], "median_s": many_s,
                            "rows": many[-1]["rows"], "problems": many[-1]["statuses"]},
        "ratio_vs_slowest_single": round(many_s / slowest, 2),
        "ratio_vs_median_single": round(many_s / median_one, 2),
        "goal": "16 targets in at most 2x the time of one",
        # The targets share this machine's CPUs with dfdoctor: 16 can finish no sooner than the CPU time they
        # all cost (dfdoctor's, and the targets' side: sshd, lxc-attach, docker, the probes) spread over every
        # core. cpu_s is dfdoctor's own tree (its rusage), machine_cpu_s everything the machine did meanwhile.
        "cpu_floor_s": round(statistics.median(r["machine_cpu_s"] for r in many) / (os.cpu_count() or 1), 2),
        "dfdoctor_share_of_cpu": round(statistics.median(r["cpu_s"] / max(r["machine_cpu_s"], 0.01) for r in many), 2),
    }
    result["wall_over_cpu_floor"] = round(many_s / max(result["cpu_floor_s"], 0.01), 2)
    Path(args.out).write_text(json.dumps(result, indent=2, default=list) + "\n")
    print(json.dumps({k: result[k] for k in ("ratio_vs_slowest_single", "ratio_vs_median_single", "cpu_floor_s",
                                             "wall_over_cpu_floor", "dfdoctor_share_of_cpu")}),
          f"16 targets: {many_s:.1f} s; one target alone: "
          + ", ".join(f"{k} {v['median_s']:.1f} s" for k, v in singles.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
