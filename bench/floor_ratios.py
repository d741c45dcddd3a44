"""Issue 45's table: each line as a ratio to what the work cannot avoid, measured side by side in one run.

| line     | measured                                                  | its reference in the same round              |
| seed     | `check -- ssh root@dfdoctor-host "pct exec 200 -- nohup python3 T > LOG 2>&1 &"` (must still fail
|            `log-dir-missing`, with a fix that works)                  | `ssh dfdoctor-host "pct exec 200 -- python3 -c pass"` |
| checked  | `launch --target pct://...` to running                    | the same launch with `--no-check`             |
| progress | `launch --no-check` (here) of a job printing a line every 0.5 s, to running (must say `running`)
|                                                                       | `python -u job.py | head -6`                  |
| local    | `check -- python train.py` (train.py imports torch), wall and CPU | `python -c "import torch"`            |
| demo     | a fresh clone's `make demo`, to its report                | the same pins installed into a fresh venv, as the Makefile does |

The machine here is shared and its speed drifts by a fifth within minutes, so every measured run is set against
the reference run next to it (a round runs the reference and each version, in an order that rotates), and the
median of those paired ratios is the figure; the ratio of the medians is printed beside it.

Each version is a package tree of a git revision (bench/remote_launch_running.py's `tree`), compiled once, run as
`python -m dfdoctor` with it first on PYTHONPATH; every run gets fresh cache and state folders (a newcomer's).
The demo line clones the revision instead (`git clone` + `git checkout`), as a newcomer does.

Needs the test infrastructure for seed and checked (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/floor_ratios.py [--version before=REV] [--version after=.] [--lines seed,checked,...]
      [--rounds 5] [--out bench/results/floor_ratios.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_launch_running import INFRA_ENV, JOB, ROOT, tree  # noqa: E402  (the same package trees)

LINES = ("seed", "checked", "progress", "local", "demo")
TRAIN = "import torch\nimport helper\nprint('ok', torch.__version__)\n"
# a job that prints a line every half second until a stop file appears beside it (at most 10 minutes)
SLOW_JOB = ("import os, time\nhere = os.path.dirname(os.path.abspath(__file__))\nfor i in range(1200):\n"
            "    print('step', i, flush=True)\n    if os.path.exists(os.path.join(here, 'stop')):\n        break\n"
            "    time.sleep(0.5)\n")


class Cpu:
    """CPU seconds of the children waited for since the last call (RUSAGE_CHILDREN grows as each is reaped)."""

    def __init__(self) -> None:
        self.last = self._now()

    @staticmethod
    def _now() -> float:
        u = resource.getrusage(resource.RUSAGE_CHILDREN)
        return u.ru_utime + u.ru_stime

    def since(self) -> float:
        now = self._now()
        took, self.last = now - self.last, now
        return took


CPU = Cpu()


def timed(argv, env: dict, cwd: str, timeout: float = 300, shell: bool = False):
    """Wall and CPU seconds of one run, and what it printed."""
    CPU.since()
    began = time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, shell=shell)
    return time.perf_counter() - began, CPU.since(), p


class Bench:
    def __init__(self, args, tmp: Path):
        self.args, self.tmp = args, tmp
        self.py = sys.executable
        self.rows: dict[str, dict[str, dict[str, list]]] = {}
        self.loads = [os.getloadavg()[0]]
        self.base_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.infra = {}
        if INFRA_ENV.exists():
            self.infra = dict(ln.split("=", 1) for ln in INFRA_ENV.read_text().splitlines() if "=" in ln)
            self.base_env["DFDOCTOR_SSH_CONFIG"] = self.infra["DFDOCTOR_SSH_CONFIG"]

    def note(self, line: str, who: str, wall: float, cpu: float = None) -> None:
        r = self.rows.setdefault(line, {}).setdefault(who, {"wall": [], "cpu": []})
        r["wall"].append(round(wall, 3))
        if cpu is not None:
            r["cpu"].append(round(cpu, 3))

    def env(self, path: Path = None, **extra) -> dict:
        """A run's environment: fresh cache and state folders, the version's tree first on PYTHONPATH."""
        fresh = self.tmp / f"home-{uuid.uuid4().hex[:8]}"
        e = dict(self.base_env, XDG_CACHE_HOME=str(fresh / "cache"), XDG_STATE_HOME=str(fresh / "state"), **extra)
        if path is not None:
            e["PYTHONPATH"] = str(path)
        return e

    # -- the lines -------------------------------------------------------------------------------------------------
    def container(self) -> tuple[str, Path]:
        rootfs = Path("/var/lib/lxc") / self.infra["DFDOCTOR_INFRA_VMID"] / "rootfs"
        inside = f"/dfd-ratio-{uuid.uuid4().hex[:8]}"  # in the container only: the host has no such folder
        host_side = rootfs / inside.lstrip("/")
        host_side.mkdir(parents=True)
        (host_side / "t.py").write_text(JOB)
        return inside, host_side

    @staticmethod
    def stop(host_side: Path) -> None:
        (host_side / "stop").touch()
        time.sleep(1.0)
        (host_side / "stop").unlink()

    def seed(self, versions: dict, inside: str, host_side: Path) -> dict:
        cfg = self.base_env["DFDOCTOR_SSH_CONFIG"]
        line = f"pct exec 200 -- nohup python3 {inside}/t.py > {inside}/t.log 2>&1 &"
        runs = {"ref": lambda: timed(["ssh", "-F", cfg, "root@dfdoctor-host", "pct exec 200 -- python3 -c pass"],
                                     self.base_env, str(self.tmp))}
        for name, path in versions.items():
            runs[name] = (lambda path=path: timed([self.py, "-m", "dfdoctor", "check", "--format", "json", "--",
                                                   "ssh", "root@dfdoctor-host", line], self.env(path), str(self.tmp)))
        out = {}
        for who, run in runs.items():
            wall, _, p = run()
            if who != "ref":
                doc = json.loads(p.stdout)
                lp = next(c for c in doc["checks"] if c["id"] == "launch.path")
                if p.returncode != 1 or doc["verdict"]["cause"] != "log-dir-missing" or \
                        not (lp.get("data", {}).get("fix") or {}).get("works"):
                    raise SystemExit(f"{who}: the seed's line no longer fails by observation with a working fix: "
                                     f"{doc['verdict']}")
            elif p.returncode != 0:
                raise SystemExit(f"the reference failed: {p.stderr}")
            out[who] = (wall, None)
        return out

    def checked(self, versions: dict, inside: str, host_side: Path) -> dict:
        target = f"pct://root@127.0.0.1:{self.infra['DFDOCTOR_INFRA_SSH_PORT']}/{self.infra['DFDOCTOR_INFRA_VMID']}"
        out = {}
        for name, path in versions.items():
            launch = [self.py, "-m", "dfdoctor", "launch", "--target", target, "--cwd", inside, "--log",
                      f"{inside}/train.log", "--format", "json", "--", "python3", "-u", f"{inside}/t.py"]
            for who, argv in ((f"{name} (--no-check)", launch[:4] + ["--no-check"] + launch[4:]), (name, launch)):
                wall, _, p = timed(argv, self.env(path), str(self.tmp))
                state = json.loads(p.stdout)["verdict"]["state"] if p.stdout.strip() else None
                self.stop(host_side)
                if state != "running":
                    raise SystemExit(f"{who}: not running ({state}): {p.stderr[-1500:]}")
                out[who] = (wall, None)
        return out

    def progress(self, versions: dict) -> dict:
        folder = self.tmp / f"slow-{uuid.uuid4().hex[:6]}"
        folder.mkdir()
        (folder / "job.py").write_text(SLOW_JOB)
        wall, _, p = timed(f"{self.py} -u job.py | head -6", self.base_env, str(folder), shell=True)
        if len(p.stdout.splitlines()) != 6:
            raise SystemExit(f"the reference job printed {p.stdout!r}")
        out = {"ref": (wall, None)}
        for name, path in versions.items():
            (folder / "stop").unlink(missing_ok=True)
            wall, _, p = timed([self.py, "-m", "dfdoctor", "launch", "--no-check", "--log", str(folder / "train.log"),
                                "--format", "json", "--", self.py, "-u", "job.py"], self.env(path), str(folder))
            state = json.loads(p.stdout)["verdict"]["state"] if p.stdout.strip() else None
            (folder / "stop").touch()
            time.sleep(0.7)
            if state != "running":
                raise SystemExit(f"{name}: the slow job is not running ({state}): {p.stderr[-1500:]}")
            out[name] = (wall, None)
        return out

    def local(self, versions: dict) -> dict:
        proj = self.tmp / "proj"
        if not proj.exists():
            proj.mkdir()
            (proj / "train.py").write_text(TRAIN)
            (proj / "helper.py").write_text("x = 1\n")
        wall, cpu, p = timed([self.py, "-c", "import torch"], self.base_env, str(proj))
        out = {"ref": (wall, cpu)}
        for name, path in versions.items():
            # one cache folder per version for the whole run: a user's second `check` (the first fills it)
            e = dict(self.base_env, PYTHONPATH=str(path), XDG_CACHE_HOME=str(self.tmp / f"local-cache-{name}"))
            wall, cpu, p = timed([self.py, "-m", "dfdoctor", "check", "--cwd", str(proj), "--", self.py, "train.py"],
                                 e, str(proj))
            if p.returncode != 0:
                raise SystemExit(f"{name}: the local check failed: {p.stdout[-1500:]} {p.stderr[-1500:]}")
            out[name] = (wall, cpu)
        return out

    def demo(self, revs: dict) -> dict:
        """A fresh clone's `make demo` to its report, against the Makefile's own venv steps with the same pins."""
        base = self.tmp / f"demo-{uuid.uuid4().hex[:6]}"
        base.mkdir()
        py3 = shutil.which("python3")
        ref = base / "ref"
        reqs = ROOT / "requirements-run.txt"
        script = (f"{py3} -m venv --without-pip {ref} && {py3} -m pip --python {ref}/bin/python install -q "
                  f"--disable-pip-version-check pip==26.3 && {ref}/bin/pip install -q --disable-pip-version-check "
                  f"-r {reqs}")
        wall, _, p = timed(script, self.base_env, str(base), shell=True, timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"the reference install failed: {p.stderr[-1500:]}")
        out = {"ref": (wall, None)}
        for name, rev in revs.items():
            clone = base / name
            subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
            subprocess.run(["git", "-C", str(clone), "checkout", "-q",
                            subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD" if rev == "." else rev],
                                           check=True, capture_output=True, text=True).stdout.strip()], check=True)
            e = self.env()
            wall, _, p = timed(["make", "demo"], e, str(clone), timeout=900)
            subprocess.run([str(clone / ".venv/bin/dfdoctor"), "stop"], env=e, cwd=str(clone), capture_output=True,
                           timeout=120)
            if p.returncode != 0 or not (clone / "out/launch.html").exists():
                raise SystemExit(f"{name}: make demo failed: {p.stdout[-1500:]} {p.stderr[-1500:]}")
            out[name] = (wall, None)
            shutil.rmtree(clone, ignore_errors=True)
        shutil.rmtree(ref, ignore_errors=True)
        return out

    # -- the run ---------------------------------------------------------------------------------------------------
    def run(self) -> dict:
        revs = dict(v.split("=", 1) for v in self.args.version)
        versions = {n: tree(r, self.tmp / f"tree-{n}") for n, r in revs.items()}
        for p in versions.values():
            subprocess.run([self.py, "-m", "compileall", "-q", str(p)], check=True, stdout=subprocess.DEVNULL)
        lines = self.args.lines.split(",")
        inside = host_side = None
        if {"seed", "checked"} & set(lines):
            inside, host_side = self.container()
        try:
            if "local" in lines:  # one warm-up each, not counted: the page cache, the version's cache folder
                self.local(versions)
            for rnd in range(self.args.rounds):
                order = list(versions.items())
                order = order[rnd % len(order):] + order[:rnd % len(order)]
                vs = dict(order)
                for line in lines:
                    if line == "demo" and rnd >= self.args.demo_rounds:
                        continue
                    got = {"seed": lambda: self.seed(vs, inside, host_side),
                           "checked": lambda: self.checked(vs, inside, host_side),
                           "progress": lambda: self.progress(vs),
                           "local": lambda: self.local(vs),
                           "demo": lambda: self.demo({n: revs[n] for n in vs})}[line]()
                    for who, (wall, cpu) in got.items():
                        self.note(line, who, wall, cpu)
                    self.loads.append(os.getloadavg()[0])
                    print(f"round {rnd} {line}: " + ", ".join(f"{w} {v[0]:.2f}s" for w, v in got.items()),
                          file=sys.stderr, flush=True)
        finally:
            if host_side is not None:
                (host_side / "stop").touch()
                time.sleep(1.0)
                shutil.rmtree(host_side, ignore_errors=True)
        return self.summary(revs)

    def summary(self, revs: dict) -> dict:
        result = {"versions": revs, "rounds": self.args.rounds, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                       time.gmtime()),
                  "cpus": os.cpu_count(),
                  "load_1min": {"min": round(min(self.loads), 2), "median": round(statistics.median(self.loads), 2),
                                "max": round(max(self.loads), 2)}, "lines": {}}
        for line, by in self.rows.items():
            med = {who: {"wall_s": round(statistics.median(d["wall"]), 3), "all_wall_s": d["wall"],
                         **({"cpu_s": round(statistics.median(d["cpu"]), 3), "all_cpu_s": d["cpu"]} if d["cpu"]
                            else {})} for who, d in by.items()}
            ratios = {}
            for name in revs:
                ref = "ref" if "ref" in by else f"{name} (--no-check)"
                kinds = ("wall", "cpu") if by[name]["cpu"] else ("wall",)
                ratios[name] = {k: {"paired_median": round(statistics.median(
                    a / b for a, b in zip(by[name][k], by[ref][k])), 3),
                    "of_medians": round(statistics.median(by[name][k]) / statistics.median(by[ref][k]), 3)}
                    for k in kinds}
            result["lines"][line] = {"medians": med, "ratios": ratios}
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="append", help="NAME=REV (REV `.` is the work tree); default after=.")
    ap.add_argument("--lines", default=",".join(LINES[:-1]), help=f"comma-separated, of {','.join(LINES)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--demo-rounds", type=int, default=2, help="rounds of the demo line (each takes minutes)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.version = args.version or ["after=."]
    with tempfile.TemporaryDirectory(prefix="dfd-ratios-") as tmp:
        result = Bench(args, Path(tmp)).run()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
