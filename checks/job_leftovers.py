"""job.leftovers: after the job's main process ended, did any of its processes stay behind?

Stray workers (dataloader processes, compile workers, a daemonised helper) keep GPU memory, ports and file
locks, so the next launch fails in ways that look unrelated. The recorder notes who was still in the job's
process group when it ended, with each one's start time; this check says which of them still run now, where
the job ran (this machine, or the target through a probe), and never mistakes a recycled pid for one of them.
"""

from __future__ import annotations

from pathlib import Path

from dfdoctor import check, ok, skip, warn
from dfdoctor.run.record import load
from dfdoctor.probe import run_probe, unreached

from .probes.leftovers_probe import still_running


@check("job.leftovers", title="No process of the job outlived it", phases=("post",), timeout=20)
def job_leftovers(ctx):
    """Read the exit record's leftovers and keep those still alive."""
    if not ctx.run or not ctx.run.get("dir"):
        yield skip("no launched run to look at")
        return
    run = load(Path(ctx.run["dir"]))
    if not run.exit:
        yield skip("the job has not ended (or its end was not recorded)")
        return
    # Records written before start times were kept name pids only: then existence is all there is to go on.
    recorded = run.exit.get("leftover_starts") or {str(p): None for p in run.exit.get("leftovers") or ()}
    if not recorded:
        yield ok("nothing of the job was left running when it ended")
        return
    where = ctx.run.get("target")
    nonce = (run.recorder or {}).get("nonce")  # what proves a process is the job's (procfs.is_job_of)
    if where:
        out = run_probe(ctx, "leftovers_probe.py", request={"starts": recorded, "nonce": nonce}, timeout=15)
        unreachable = unreached(ctx, out)
        if unreachable:
            yield unreachable
            return
        if out.payload is None:
            yield skip(f"could not look at the job's processes on {where}: "
                       f"{out.spawn_error or (out.stderr.strip()[-300:] or f'exit {out.returncode}')}")
            return
        alive = out.payload["alive"]
    else:
        alive = still_running(recorded, nonce)
    # A process left writing its own output file is the work the command handed off (the verdict judges it),
    # not a straggler to kill.
    work = {p["pid"] for p in run.exit.get("left_writing") or []}
    handed = [a for a in alive if a["pid"] in work]
    alive = [a for a in alive if a["pid"] not in work]
    if not alive:
        pids = ", ".join(f"pid {a['pid']}" for a in handed)
        yield ok(f"the command's work goes on in {pids}; nothing else was left running" if handed else
                 f"{len(recorded)} process(es) were left in the job's group when it ended; none runs now")
        return
    pids = [a["pid"] for a in alive]
    proved = [a["pid"] for a in alive if a.get("proved")]
    on = f" on {where}" if where else ""
    # `dfdoctor stop` is offered only when every one carries the run's marker: a forged run folder can name any process
    stop = (f"Stop them before relaunching: `dfdoctor stop {ctx.run.get('id') or ctx.run['dir']}` ends each one "
            f"proven the job's{on}; they may hold GPU memory, ports or locks. Make the job join its workers "
            "before it exits.") if len(proved) == len(pids) else (
            f"Look at {' '.join(map(str, pids))}{on} before stopping anything: "
            + ("only " + ' '.join(map(str, proved)) + " carries" if proved else "none carries")
            + " this run's mark in its environment, so the rest are not proved to be the job's (a recycled start "
            "time, an older record, or a run folder that is not what it claims). Make the job join its workers "
            "before it exits.")
    yield warn(f"{len(alive)} process(es) of the job still run{on} after it ended: {', '.join(map(str, pids))}",
               evidence=tuple(f"pid {a['pid']}: {a['cmdline']}" + ("" if a.get("proved") else " (not proved the job's)")
                              for a in alive),
               fix=stop, data={"leftovers": pids, "proved": proved})
