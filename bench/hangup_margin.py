"""The margin the rehearsal's look keeps for the hang-up race, measured: how long after dfdoctor saw a line's
session end does a job that the end of that session kills actually die?

Each line below starts a job that dies when its session ends (a background job under a terminal, a `setsid -f`
that lxc-attach's terminal catches). It is rehearsed with a long margin (3 s, so a late death is still seen);
the sentinel writes when it died (end.json: started_at + after_s, wall clock) and the runner when the line's
terminal hung up (`Rehearsal.ended_at`, turned to wall clock here). The gap between the two is the figure: a
negative gap is a job that died before dfdoctor saw the session end. The rehearsal's SETTLE_S must exceed the
largest gap with room to spare.

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  DFDOCTOR_SSH_CONFIG=/var/lib/dfdoctor-infra/ssh_config .venv/bin/python bench/hangup_margin.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from dfdoctor.rehearse import runner

# `; sleep 0.5` keeps each session open until its job has started, so that the job dies of the session's end
LINES = {
    "local terminal, plain &": "python3 -u {work}/t.py & sleep 0.5",
    "ssh -tt, plain & on the host": "ssh -tt root@dfdoctor-host 'python3 -u {work}/t.py & sleep 0.5'",
    "ssh -tt + pct exec, plain &": "ssh -tt root@dfdoctor-host \"pct exec 200 -- sh -c 'python3 -u {work}/t.py & "
                                   "sleep 0.5'\"",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", default="/tmp")
    args = ap.parse_args()
    runner.SETTLE_S = 3.0  # long enough to see a late death; the figure says how much of it is needed
    gaps: dict[str, list[float]] = {k: [] for k in LINES}
    survived: dict[str, int] = {k: 0 for k in LINES}
    for _ in range(args.rounds):
        for name, line in LINES.items():
            off = time.time() - time.monotonic()
            r = runner.rehearse(line.format(work=args.work))
            p = r.job_place
            end = (p.end or {}) if p else {}
            if p and p.start and end.get("how") in ("signal", "write-failed") and r.ended_at:
                died = float(p.start["started_at"]) + float(end["after_s"])
                gaps[name].append(round(died - (r.ended_at + off), 3))
            elif r.alive:
                survived[name] += 1
    every = [g for v in gaps.values() for g in v]
    print(json.dumps({"rounds": args.rounds, "gap_s": gaps, "survived": survived,
                      "max_gap_s": max(every) if every else None,
                      "median_gap_s": statistics.median(every) if every else None,
                      "margin_s": runner.SETTLE_S, "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
