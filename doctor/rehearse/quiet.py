"""Whether anything of the line is left that may still start the job: seen, not waited for.

A line whose session returned without starting the sentinel may still start it later: a process of the line still
on its way (a background `pct exec … &` whose redirect opened, `ssh -f`). The runner waited a fixed NO_START_S
for that after the line's last process here was gone. Where every place the line reaches is one ssh host and
containers of that host (pct exec, lxc-attach), that host can say instead whether a process of the line still
runs (look.sh's `quiet`): the host sees its containers' processes, and every process on the way to the job carries
the rehearsal's mark in its words. The shells that run the line run its text, which names the sentinel; ssh's
remote command is the login shell's words (there the wall's `sh -c WALL … -c TEXT`: so only where the wall's
quoting carries it; a shell that read the line from its input would not carry it); `pct exec` is `exec
lxc-attach` with the same words, and lxc-attach starts the command in a fork of itself (its words until it execs
the command), then waits for it, terminal or not (pause.py). A process that leaves lxc-attach behind (killed) is
still seen: it runs in the container. So: nothing of the line here (runner._line_lives), nothing at the host, and
no sentinel seen is "never started". Other hops (docker exec, kubectl exec: a daemon starts the command, in
processes that do not carry the line's words; a second ssh host: out of the first's sight) keep the fixed wait.
"""

from __future__ import annotations

from typing import Optional

from dfdoctor.rehearse.pause import ATTACH_KINDS


def host(plan) -> Optional[tuple]:
    """The chain of the one place that sees every process the line may run away from this machine (its ssh
    host, where the job is in a container of it), or None where no such place is proven."""
    job = plan.job
    if job is None or len(job.chain) < 2 or job.chain[0].kind != "ssh":
        return None  # a job at the ssh host itself is its own look's to say (not asked: the fixed wait stays)
    first = job.chain[:1]
    if first not in plan.walls:
        return None  # the host's processes are known by their words only where the ssh hop carries the line's text
    chains = [job.chain, *(log.chain for log in plan.logs), *(chain for chain, _ in plan.multiplexers)]
    for chain in chains:
        if chain and (tuple(chain[:1]) != first or any(hop.kind not in ATTACH_KINDS for hop in chain[1:])):
            return None
    return first
