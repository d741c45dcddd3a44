"""What the rehearsal's second wall costs (doctor/rehearse/wall.py): the ssh + pct exec lines of
bench/rehearse_time.py (and this machine's), rehearsed with the wall and with it switched off, interleaved.

    .venv/bin/python bench/rehearse_wall.py [ROUNDS] [OUT.json]

Prints the median and worst seconds of each, and whether every outcome was the expected one (the good line
passes, the broken one does not) both ways. The goal: one rehearsal at most 10 s.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rehearse_time import TRAIN, lines  # noqa: E402

from dfdoctor.rehearse import judge, rewrite, wall  # noqa: E402
from dfdoctor.rehearse.runner import rehearse  # noqa: E402

_PLAN, _HERE = rewrite.plan, wall.why_not_here


def switch(on: bool) -> None:
    """The wall on, or off everywhere (no walled line, none on this machine)."""
    if on:
        rewrite.plan, wall.why_not_here = _PLAN, _HERE
        return

    def plan(*a, **k):
        p = _PLAN(*a, **k)
        p.walled_line, p.walls = "", []
        return p

    rewrite.plan, wall.why_not_here = plan, lambda: "switched off by the bench"


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    out_path = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("bench/results/rehearse_wall.json")
    name = f"dfd-bench-wall-{uuid.uuid4().hex[:8]}"
    work = f"/tmp/{name}"
    folders = [Path(work), Path("/var/lib/lxc/200/rootfs") / "tmp" / name]
    for f in folders:
        f.mkdir(parents=True)
        (f / "train.py").write_text(TRAIN)
    times: dict[str, list[float]] = {}
    wrong, walls = [], set()
    try:
        for _ in range(rounds):
            for kind in ("local", "pct"):
                good, broken = lines(work)[kind]
                for on in (True, False):
                    switch(on)
                    for label, line, want in (("good", good, True), ("broken", broken, False)):
                        began = time.monotonic()
                        r = rehearse(line, cwd=work)
                        key = f"{kind} {label} wall {'on' if on else 'off'}"
                        times.setdefault(key, []).append(round(time.monotonic() - began, 2))
                        walls.add(r.wall)
                        if judge.passed(r) != want:
                            wrong.append({"case": key, "facts": judge.facts(r)})
    finally:
        switch(True)
        for f in folders:
            shutil.rmtree(f, ignore_errors=True)
    summary = {k: {"median_s": statistics.median(v), "worst_s": max(v), "runs": v} for k, v in times.items()}
    result = {"rounds": rounds, "load": os.getloadavg(), "cores": os.cpu_count(), "cases": summary,
              "walls_seen": sorted(walls), "wrong_outcomes": wrong}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1))
    for k, s in summary.items():
        print(f"{k:24s} median {s['median_s']:5.2f} s (worst {s['worst_s']:5.2f})")
    print(f"load {result['load']}, wrong outcomes: {len(wrong)}")
    for w in sorted(walls):
        print(w)
    if wrong:
        print(json.dumps(wrong, indent=1))


if __name__ == "__main__":
    main()
