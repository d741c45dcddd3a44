"""Issue 36's table, before and after, side by side in one run: a checked `launch --target pct://...` to
"running", the same with `--no-check`, `check --target pct://...`, the seed's line given to `check`, and a local
`check` against `python -c "import torch"` (wall and CPU).

Each version is a package tree of a git revision (bench/remote_launch_running.py's `tree`), compiled once (the
machines here set PYTHONDONTWRITEBYTECODE, and a wheel's install compiles too), run as `python -m dfdoctor`
with it first on PYTHONPATH. Rounds alternate the versions, so load on a shared machine hits both alike; every
run gets a fresh cache folder except the `launch (warm)` row, which reuses what the version's previous launch
on the target observed. The seed's line must still fail by observation (`log-dir-missing`) with a fix that
works, every round, or the run stops.

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/target_speed.py --before 489b843 [--after .] [--rounds 3] [--pairs 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_launch_running import INFRA_ENV, JOB, tree  # noqa: E402  (the same package trees)

TRAIN = "import torch\nimport helper\nprint('ok', torch.__version__)\n"


def timed(argv: list[str], env: dict, cwd: str, timeout: float = 180) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (the command and all it waited for) of one run, and what it printed."""
    began = time.perf_counter()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    wall = time.perf_counter() - began
    cpu = _children_cpu_since(began)
    return wall, cpu, subprocess.CompletedProcess(argv, p.returncode, out.decode(errors="replace"),
                                                  err.decode(errors="replace"))


_last_cpu = [0.0]


def _children_cpu_since(_began: float) -> float:
    """CPU of the children reaped since the last call (RUSAGE_CHILDREN grows as each is waited for)."""
    import resource
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    now = u.ru_utime + u.ru_stime
    took, _last_cpu[0] = now - _last_cpu[0], now
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=7, help="rounds of the local check against import torch")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    infra = dict(line.split("=", 1) for line in INFRA_ENV.read_text().splitlines() if "=" in line)
    target = f"pct://root@127.0.0.1:{infra['DFDOCTOR_INFRA_SSH_PORT']}/{infra['DFDOCTOR_INFRA_VMID']}"
    rootfs = Path("/var/lib/lxc") / infra["DFDOCTOR_INFRA_VMID"] / "rootfs"
    base_env = dict(os.environ, DFDOCTOR_SSH_CONFIG=infra["DFDOCTOR_SSH_CONFIG"], PYTHONDONTWRITEBYTECODE="1")
    py = sys.executable
    loads = [os.getloadavg()[0]]
    rows: dict[str, dict[str, list]] = {}

    def note(row: str, version: str, wall: float, cpu: "float | None" = None) -> None:
        r = rows.setdefault(row, {}).setdefault(version, {"wall": [], "cpu": []})
        r["wall"].append(round(wall, 3))
        if cpu is not None:
            r["cpu"].append(round(cpu, 3))

    with tempfile.TemporaryDirectory(prefix="dfd-bench36-") as tmp:
        paths = {"before": tree(args.before, Path(tmp, "before")), "after": tree(args.after, Path(tmp, "after"))}
        for p in paths.values():
            subprocess.run([py, "-m", "compileall", "-q", str(p)], check=True, stdout=subprocess.DEVNULL)
        warm = {k: f"{tmp}/warm-cache-{k}" for k in paths}
        inside = f"/dfd-bench36-{uuid.uuid4().hex[:8]}"  # in the container only: the host has no such folder
        host_side = rootfs / inside.lstrip("/")
        host_side.mkdir(parents=True)
        (host_side / "t.py").write_text(JOB)
        proj = Path(tmp, "proj")
        proj.mkdir()
        (proj / "train.py").write_text(TRAIN)
        (proj / "helper.py").write_text("x = 1\n")
        try:
            for rnd in range(args.rounds):
                order = list(paths.items()) if rnd % 2 == 0 else list(reversed(paths.items()))
                for name, path in order:
                    env = dict(base_env, PYTHONPATH=str(path), XDG_CACHE_HOME=f"{tmp}/cache-{uuid.uuid4().hex[:6]}")
                    dfd = [py, "-m", "dfdoctor"]
                    launch = [*dfd, "launch", "--target", target, "--cwd", inside, "--log", f"{inside}/train.log",
                              "--format", "json", "--", "python3", "-u", f"{inside}/t.py"]
                    for row, argv, e in (("launch, checked (cache cold)", launch, env),
                                         ("launch, checked (cache warm)", launch, dict(env, XDG_CACHE_HOME=warm[name])),
                                         ("launch --no-check", launch[:4] + ["--no-check"] + launch[4:], env)):
                        if row.endswith("(cache warm)") and rnd == 0:  # the first fills the cache: not counted
                            subprocess.run(argv, env=e, cwd=tmp, capture_output=True, timeout=180)
                            (host_side / "stop").touch(); time.sleep(1.0); (host_side / "stop").unlink()
                        wall, _, p = timed(argv, e, tmp)
                        state = json.loads(p.stdout)["verdict"]["state"] if p.stdout.strip() else None
                        (host_side / "stop").touch()
                        time.sleep(1.0)
                        (host_side / "stop").unlink()
                        if state != "running":
                            raise SystemExit(f"{name} {row}: not running ({state}): {p.stderr[-1500:]}")
                        note(row, name, wall)
                    wall, _, p = timed([*dfd, "check", "--target", target, "--format", "json", "--", "python3", "-u",
                                        f"{inside}/t.py"], env, tmp)
                    note("check --target pct://", name, wall)
                    seed = f"pct exec 200 -- nohup python3 {inside}/t.py > {inside}/t.log 2>&1 &"
                    wall, _, p = timed([*dfd, "check", "--format", "json", "--", "ssh", "root@dfdoctor-host", seed],
                                       env, tmp)
                    doc = json.loads(p.stdout)
                    lp = next(c for c in doc["checks"] if c["id"] == "launch.path")
                    if p.returncode != 1 or doc["verdict"]["cause"] != "log-dir-missing" or \
                            not (lp.get("data", {}).get("fix") or {}).get("works"):
                        raise SystemExit(f"{name}: the seed's line no longer fails by observation with a working fix: "
                                         f"{doc['verdict']}")
                    note("check -- <the seed's line>", name, wall)
                    loads.append(os.getloadavg()[0])
            # the local check against import torch: pairs in one rotation, after one discarded warm-up
            for rnd in range(args.pairs + 1):
                runs = [("import torch", [py, "-c", "import torch"], dict(base_env)),
                        *((f"local check ({n})", [py, "-m", "dfdoctor", "check", "--cwd", str(proj), "--", py,
                                                  "train.py"], dict(base_env, PYTHONPATH=str(p)))
                          for n, p in paths.items())]
                runs = runs[rnd % len(runs):] + runs[:rnd % len(runs)]
                for label, argv, e in runs:
                    _children_cpu_since(0)
                    wall, cpu, p = timed(argv, dict(e, XDG_CACHE_HOME=f"{tmp}/cache-local"), str(proj))
                    if rnd:
                        note(label, "-", wall, cpu)
                loads.append(os.getloadavg()[0])
        finally:
            (host_side / "stop").touch()
            time.sleep(1.0)
            shutil.rmtree(host_side, ignore_errors=True)
    med = {row: {v: {"wall_s": round(statistics.median(d["wall"]), 2), "all_wall_s": d["wall"],
                     **({"cpu_s": round(statistics.median(d["cpu"]), 3), "all_cpu_s": d["cpu"]} if d["cpu"] else {})}
                 for v, d in by.items()} for row, by in rows.items()}
    torch_wall, torch_cpu = med["import torch"]["-"]["wall_s"], med["import torch"]["-"]["cpu_s"]
    ratios = {v: {"wall": round(med[f"local check ({v})"]["-"]["wall_s"] / torch_wall, 3),
                  "cpu": round(med[f"local check ({v})"]["-"]["cpu_s"] / torch_cpu, 3)} for v in paths}
    # the machine's speed drifts by a fifth within minutes (a firecracker VM): each check is also set against the
    # `import torch` of its own rotation, and the median of those ratios is reported beside the ratio of medians
    t = rows["import torch"]["-"]
    paired = {v: {k: round(statistics.median(c / i for c, i in zip(rows[f"local check ({v})"]["-"][k], t[k])), 3)
                  for k in ("wall", "cpu")} for v in paths}
    result = {"before": args.before, "after": args.after, "rounds": args.rounds, "pairs": args.pairs,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
              "load_1min": {"min": round(min(loads), 2), "median": round(statistics.median(loads), 2),
                            "max": round(max(loads), 2)},
              "medians": med, "local_check_over_import_torch": ratios,
              "local_check_over_import_torch_paired": paired}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
