"""The CPU of a launch whole (the command and the flight recorder it leaves behind, which watches the job to its
end) and of `status`, in two checkouts side by side, alternated round by round (a loaded machine slows both alike).
Each process's own CPU is read from /proc while it is a zombie, by bench/tree_cpu.py (the detached recorder comes
back to it as their subreaper): the recorder's CPU is not in the launch's own, nor its job's in the recorder's.

  launch --no-check: a job printing a line every 0.5 s for 5 s (`running` after ~3 s), and its recorder
  status (ended):    that run, once its job ended
  status (running):  a job printing every 0.5 s for 15 s, started with --watch 0, then `status` while it runs

Each checkout needs its own .venv and compiled sources (`make test`'s PRECOMPILE line).

    python3 bench/launch_tree_cpu.py BEFORE_TREE AFTER_TREE [ROUNDS]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from alternated import alternated


JOB = "import sys, time\nfor i in range(int(sys.argv[1])):\n    print('step', i, flush=True)\n    time.sleep(0.5)\n"


def _measured(argv: list[str], cwd: Path, env: dict) -> tuple[float, float, float, str]:
    """(the command's own CPU with the children it waited for, the recorder's own, the stand-in's own, its
    stdout)."""
    out = cwd / "tree.json"
    said = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "tree_cpu.py"), "--json", str(out),
                           "--", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300).stdout
    rows = json.loads(out.read_text())
    top = next(r for r in rows if r["top"])
    rec = [r for r in rows if not r["top"] and " recorder " in r.get("cmd", "")]
    recorder = max(rec, key=lambda r: r.get("own_s", 0.0)) if rec else {}
    stand_in = min(rec, key=lambda r: r.get("own_s", 0.0)) if len(rec) > 1 else {}
    return (top.get("own_s", 0.0) + top.get("children_s", 0.0), recorder.get("own_s", 0.0),
            stand_in.get("own_s", 0.0), said)


def _round(tree: Path, work: Path, env: dict, res: dict) -> None:
    dfd = str(tree / ".venv" / "bin" / "dfdoctor")
    py = str(tree / ".venv" / "bin" / "python")
    cmd, rec, stand, said = _measured([dfd, "launch", "--no-check", "--watch", "10", "--format", "json", "--", py,
                                       "job.py", "10"], work, env)
    ran = json.loads(said)
    res.setdefault("verdicts", []).append(ran["verdict"]["state"])
    res.setdefault("launch --no-check: command", []).append(cmd)
    res.setdefault("launch --no-check: recorder", []).append(rec)
    res.setdefault("launch --no-check: stand-in", []).append(stand)
    res.setdefault("launch --no-check: all", []).append(cmd + rec + stand)
    cmd, _, _, said = _measured([dfd, "status", ran["run"]["id"], "--format", "json"], work, env)
    res["verdicts"].append(json.loads(said)["verdict"]["state"])
    res.setdefault("status (ended)", []).append(cmd)
    said = subprocess.run([dfd, "launch", "--no-check", "--watch", "0", "--format", "json", "--", py, "job.py", "30"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120).stdout
    live = json.loads(said)["run"]["id"]
    cmd, _, _, said = _measured([dfd, "status", live, "--format", "json"], work, env)
    res["verdicts"].append(json.loads(said)["verdict"]["state"])
    res.setdefault("status (running)", []).append(cmd)
    subprocess.run([dfd, "stop", live], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=120)


def main(argv: list[str]) -> int:
    trees = {"before": Path(argv[0]).resolve(), "after": Path(argv[1]).resolve()}
    rounds = int(argv[2]) if len(argv) > 2 else 5
    res, loads = alternated(trees, rounds, JOB, _round, "dfd-launch-tree-")
    print("verdicts before:", " ".join(res["before"].pop("verdicts")))
    print("verdicts after: ", " ".join(res["after"].pop("verdicts")))
    for case in res["before"]:
        b, a = statistics.median(res["before"][case]), statistics.median(res["after"][case])
        print(f"{case:30s} n={len(res['before'][case]):2d} CPU s median before {b:.3f} after {a:.3f} "
              f"({1000 * (a - b):+.0f} ms)")
    print(f"load (1 min) over the rounds: {min(loads):.1f}-{max(loads):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
