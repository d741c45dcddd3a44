"""What a look at a running Slurm job's processes on its node costs (issue 23, round 6), on the single-node test
cluster: `srun --overlap` starting a step that does nothing, against the whole look (`onnode.look`: the step,
the job agent's two looks 1 s apart with py-spy, the judging), side by side in one run.

    .venv/bin/python bench/slurm_look.py --repeat 5   # writes bench/results/slurm_look.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from dfdoctor.slurm import onnode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "slurm_look.txt"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="slurm_look.")
    job = subprocess.run(["sbatch", "--parsable", "-o", f"{work}/o-%j.log", "--wrap",
                          "sleep 300 | python3 -c 'input()'"], capture_output=True, text=True, check=True,
                         cwd=work).stdout.strip().split(";")[0]
    try:
        while "R" != subprocess.run(["squeue", "-h", "-j", job, "-o", "%t"], capture_output=True,
                                    text=True).stdout.strip():
            time.sleep(0.2)
        time.sleep(1)
        node = subprocess.run(["squeue", "-h", "-j", job, "-o", "%B"], capture_output=True, text=True).stdout.strip()
        bare, whole, found = [], [], set()
        for _ in range(args.repeat):
            t = time.monotonic()
            subprocess.run(["srun", "--overlap", "--jobid", job, "-w", node, "-N1", "-n1", "--quiet", "-J",
                            "dfdoctor-stacks", "true"], check=True)
            bare.append(time.monotonic() - t)
            look = onnode.look(job, node, 20.0)
            whole.append(look.took_s)
            found.add(look.finding.cause if look.finding else str(look.error))
        lines = [f"load: {os.getloadavg()}", f"job {job} on {node}: `sleep 300 | python3 -c 'input()'`",
                 f"srun --overlap ... true: median {statistics.median(bare):.2f} s, max {max(bare):.2f} s "
                 f"({args.repeat} runs)",
                 f"onnode.look (step + two looks 1 s apart + judge): median {statistics.median(whole):.2f} s, "
                 f"max {max(whole):.2f} s", f"findings: {sorted(found)}"]
    finally:
        subprocess.run(["scancel", job])
    text = "\n".join(lines) + "\n"
    print(text, end="")
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
