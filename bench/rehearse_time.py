"""Time one rehearsal of a launch line per target kind, on the test infrastructure (tests/infra/provision.sh).

    .venv/bin/python bench/rehearse_time.py [ROUNDS] [OUT.json]

For each kind (this machine, ssh to the host, ssh + pct exec into container 200, lxc-attach, docker exec) it
rehearses a good line (detached, logging; the sentinel must survive) and a broken one (the log's folder
missing where the shell opens it), ROUNDS times each, interleaved so that machine noise hits all alike, and
prints the median and worst seconds, and the ratio of each kind to the local one. The goal: at most 10 s.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DFDOCTOR_SSH_CONFIG", "/var/lib/dfdoctor-infra/ssh_config")

from dfdoctor.rehearse import judge  # noqa: E402
from dfdoctor.rehearse.runner import rehearse  # noqa: E402

TRAIN = "import time\nfor i in range(100):\n    print(i, flush=True)\n    time.sleep(0.1)\n"
SSH = "ssh root@dfdoctor-host"


def lines(work: str) -> dict[str, tuple[str, str]]:
    """kind -> (good line, broken line). `work` exists in container 200, on the host and in docker's /workspace."""
    detached = f"nohup setsid -f python3 -u {work}/train.py </dev/null >{work}/train.log 2>&1"
    missing = f"nohup python3 -u {work}/train.py > {work}/no-such-folder/train.log 2>&1 &"
    dwork = f"/workspace/{Path(work).name}"
    return {
        "local": (detached, missing),
        "ssh": (f"{SSH} '{detached}'", f"{SSH} '{missing}'"),
        "pct": (f"{SSH} \"pct exec 200 -- sh -c '{detached}'\"", f"{SSH} 'pct exec 200 -- {missing}'"),
        # from a terminal lxc-attach gives the command one, and ends its group when it returns: hence the pause
        "lxc": (f"lxc-attach -n 200 -- sh -c '{detached}; sleep 1'", f"lxc-attach -n 200 -- {missing}"),
        "docker": (f"docker exec dfdoctor-test sh -c '{detached.replace(work, dwork)}'",
                   f"docker exec dfdoctor-test sh -c '{missing.replace(work, dwork)}'"),
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    out_path = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("bench/results/rehearse_time.json")
    name = f"dfd-bench-rh-{uuid.uuid4().hex[:8]}"
    work = f"/tmp/{name}"
    folders = [Path(work), Path("/var/lib/lxc/200/rootfs") / "tmp" / name,
               Path("/var/lib/dfdoctor-infra/docker-workspace") / name]
    for f in folders:
        f.mkdir(parents=True)
        (f / "train.py").write_text(TRAIN)
    times: dict[str, dict[str, list[float]]] = {}
    wrong = []
    try:
        for _ in range(rounds):
            for kind, (good, broken) in lines(work).items():
                for label, line, want in (("good", good, True), ("broken", broken, False)):
                    began = time.monotonic()
                    r = rehearse(line, cwd=work)
                    took = time.monotonic() - began
                    times.setdefault(kind, {}).setdefault(label, []).append(round(took, 2))
                    if judge.passed(r) != want:
                        wrong.append({"kind": kind, "line": label, "facts": judge.facts(r)})
    finally:
        for f in folders:
            shutil.rmtree(f, ignore_errors=True)
    local = statistics.median(times["local"]["good"] + times["local"]["broken"])
    summary = {kind: {label: {"median_s": statistics.median(v), "worst_s": max(v), "runs": v}
                      for label, v in by.items()} | {"ratio_to_local": round(
                          statistics.median(by["good"] + by["broken"]) / local, 2)}
               for kind, by in times.items()}
    result = {"rounds": rounds, "load": os.getloadavg(), "cores": os.cpu_count(), "kinds": summary,
              "wrong_outcomes": wrong}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1))
    for kind, s in summary.items():
        print(f"{kind:7s} good median {s['good']['median_s']:5.2f} s (worst {s['good']['worst_s']:5.2f})   "
              f"broken median {s['broken']['median_s']:5.2f} s (worst {s['broken']['worst_s']:5.2f})   "
              f"x{s['ratio_to_local']} of local")
    print(f"load {result['load']}, wrong outcomes: {len(wrong)}")
    if wrong:
        print(json.dumps(wrong, indent=1))


if __name__ == "__main__":
    main()
