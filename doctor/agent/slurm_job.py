"""What dfdoctor runs on a Slurm job's node, as a step of that job (`srun --overlap --jobid ID -w NODE`): every
process of the job there, looked at twice a second apart, as on a --target (`target_agent.sample`).

Standard library only (the node's python3, 3.6+), shipped over stdin like the target agent itself
(`ship.stdin_argv`); nothing is installed or written on the node. The job's processes are those whose
environment carries its SLURM_JOB_ID (the batch script, what it started, its other steps), less this step's
own. Runs as the agent's part `slurm-job JOB_ID PY_SPY` and answers after the target agent's marker.
"""

import json
import os
import shutil
import socket
import sys

from dfdoctor.agent.target_agent import MARK, MAX_PROCESSES, sample


def _environ(pid):
    """A process's environment as a dict ({} when it cannot be read: another user's, or gone)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return {}
    return dict(e.split("=", 1) for e in raw.split("\0") if "=" in e)


def job_pids(job_id):
    """The pids of the job's processes on this node, oldest first, this step's own left out."""
    me, step = os.getpid(), os.environ.get("SLURM_STEP_ID")
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        env = _environ(int(name))
        if env.get("SLURM_JOB_ID") == job_id and not (step is not None and env.get("SLURM_STEP_ID") == step):
            pids.append(int(name))
    return sorted(pids)[:MAX_PROCESSES]


def main(argv):
    """`slurm-job JOB_ID PY_SPY` (PY_SPY: a path, or '' to look for py-spy on the node's PATH)."""
    if len(argv) != 3:
        sys.stderr.write("usage: slurm-job JOB_ID PY_SPY\n")
        return 2
    spy = argv[2] if argv[2] and os.access(argv[2], os.X_OK) else shutil.which("py-spy")
    pids = job_pids(argv[1])
    answer = {"host": socket.gethostname(), "pids": pids, "py_spy": bool(spy), "samples": sample(pids, spy)}
    sys.stdout.write(MARK + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
