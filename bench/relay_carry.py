"""A checked --target launch's relay (issue 45, round 18), two versions side by side: seconds from opening the
relay on pct container 200 to its ping's answer, and of each probe it carries (the echo probe of tests/infra, ten
in a row per run). Runs alternate between the versions; each version's tree is compiled first, as an installed
dfdoctor is (the agent's zip then carries its bytecode).

Needs the test infrastructure (tests/infra/provision.sh, root). Usage:
  .venv/bin/python bench/relay_carry.py [--version before=main] [--version after=.] [--runs 10] [--out FILE]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# (the same package trees)
from remote_launch_running import (  # noqa: E402
    ROOT, compiled_trees, in_turns, infra_settings, versions_cli, pct_target, write_result)

ECHO = ROOT / "tests" / "infra" / "echo_probe.py"
CARRIES = 10
# one run, in the version's own interpreter: open the relay, wait for its ping, then carry the probe CARRIES times
ONE = """
import json, sys, time
from dfdoctor.targets import parse_target, relay, remote_probe, transport
from dfdoctor.targets.ping import ping_argv
target, echo, n = parse_target(sys.argv[1]), sys.argv[2], int(sys.argv[3])
line = remote_probe.line(__import__("pathlib").Path(echo), ["x"], timeout=30, env={}, cwd=None, python=None)
carried = []
with transport.connected(target) as err:
    assert err is None, err
    began = time.perf_counter()
    relay.open_for(target, "python3", ping=tuple(ping_argv("python3")))
    assert relay.ping(target, "python3", 30) is not None
    ready = time.perf_counter() - began
    for _ in range(n):
        began = time.perf_counter()
        said = relay.carry(target, "python3", line, 30, 60)
        carried.append(time.perf_counter() - began)
        assert said and said["rc"] == 0, said
    relay.close()
print(json.dumps({"ready": ready, "carried": carried}))
"""


def main() -> None:
    args, revs = versions_cli(__doc__, runs=10)
    infra = infra_settings()
    target = pct_target(infra)
    rows = {n: {"ready": [], "carried": []} for n in revs}
    loads = []
    with tempfile.TemporaryDirectory(prefix="dfd-relay-") as tmp:
        paths = compiled_trees(revs, Path(tmp))
        for i in range(args.runs):
            for name, path in in_turns(paths, i):
                env = dict(os.environ, PYTHONPATH=str(path), PYTHONDONTWRITEBYTECODE="1",
                           DFDOCTOR_SSH_CONFIG=infra["DFDOCTOR_SSH_CONFIG"])
                p = subprocess.run([sys.executable, "-c", ONE, target, str(ECHO), str(CARRIES)], capture_output=True,
                                   text=True, env=env, cwd=tmp, timeout=300)
                if p.returncode != 0:
                    raise SystemExit(f"{name}: {p.stderr[-1500:]}")
                one = json.loads(p.stdout.strip().splitlines()[-1])
                rows[name]["ready"].append(round(one["ready"], 4))
                rows[name]["carried"] += [round(s, 4) for s in one["carried"]]
                loads.append(os.getloadavg()[0])
    out = {"versions": revs, "runs": args.runs, "carries_per_run": CARRIES,
           "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
           "medians": {n: {"ready": round(statistics.median(r["ready"]), 3),
                           "carried": round(statistics.median(r["carried"]), 3),
                           "carried_p90": round(statistics.quantiles(r["carried"], n=10)[-1], 3)}
                       for n, r in rows.items()},
           "all": rows}
    write_result(out, args.out)


if __name__ == "__main__":
    main()
