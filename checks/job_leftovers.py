"""job.leftovers: after the job's main process ended, did any of its processes stay behind?

Stray workers (dataloader processes, compile workers, a daemonised helper) keep GPU memory, ports and file
locks, so the next launch fails in ways that look unrelated. The recorder notes who was still in the job's
process group when it ended; this check says which of them still run now.
"""

from __future__ import annotations

from pathlib import Path

from doctor import check, ok, skip, warn
from doctor.rundir import load
from doctor.recorder import proc_start_time


@check("job.leftovers", title="No process of the job outlived it", phases=("post",), timeout=10)
def job_leftovers(ctx):
    """Read the exit record's leftovers and keep those still alive."""
    if not ctx.run or not ctx.run.get("dir"):
        yield skip("no launched run to look at")
        return
    run = load(Path(ctx.run["dir"]))
    if not run.exit:
        yield skip("the job has not ended (or its end was not recorded)")
        return
    alive = [pid for pid in run.exit.get("leftovers") or () if proc_start_time(pid) is not None]
    if not alive:
        yield ok("nothing of the job was left running after it ended")
        return
    names = [_cmdline(pid) for pid in alive]
    yield warn(f"{len(alive)} process(es) of the job still run after it ended: {', '.join(map(str, alive))}",
               evidence=tuple(f"pid {p}: {n}" for p, n in zip(alive, names)),
               fix=f"Stop them before relaunching (kill {' '.join(map(str, alive))}); they may hold GPU memory, "
                   "ports or locks. Make the job join its workers before it exits.",
               data={"leftovers": alive})


def _cmdline(pid: int) -> str:
    """A process's command line, for the evidence."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"
