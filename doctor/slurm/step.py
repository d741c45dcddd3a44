"""The Slurm step a process runs in, read from its task environment: the step's nodes in order, this node's
place among them, and where the first node can be reached. cuda.nccl uses it to form one group over every
node of an allocation, the way a multi-node torchrun does (rank 0 on the first node, MASTER_ADDR its address).

The first node's address is its NodeAddr (`scontrol show node`), not its name: a node name need not resolve
(several nodes of one host, or names only Slurm knows), and NodeAddr is what slurmctld itself connects to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

from dfdoctor.numbers import is_whole, whole
from dfdoctor.slurm import commands

PORT_BASE, PORT_SPAN = 20000, 30000
# Set by `check --slurm-nodes` in its srun's environment: cuda.nccl on each node then joins one group over the
# whole step instead of testing its own GPUs alone.
ACROSS_NODES = "DFDOCTOR_NCCL_ACROSS_NODES"


@dataclass(frozen=True)
class Step:
    """One Slurm step, as a task of it sees it."""

    job_id: str
    step_id: str
    nodes: tuple[str, ...]  # node names, in the step's order (SLURM_NODEID indexes this)
    index: int  # this node's place in `nodes`
    head_addr: str  # where nodes[0] is reached

    @property
    def port(self) -> int:
        """A rendezvous port every node derives alike from the job and step ids (none can tell the others)."""
        key = int(self.job_id) * 131 + whole(self.step_id, 0)
        return PORT_BASE + key % PORT_SPAN

    def node_of(self, rank: int, per_node: int) -> str:
        """The node a global rank runs on, when every node runs `per_node` ranks in order."""
        i = rank // per_node if per_node > 0 else -1
        return self.nodes[i] if 0 <= i < len(self.nodes) else "?"


def current(env: Mapping[str, str]) -> Union[Step, str]:
    """The step this environment is a task of, or why it cannot be read (in words)."""
    job, step = env.get("SLURM_JOB_ID", ""), env.get("SLURM_STEP_ID", "")
    nodelist, nodeid = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST", ""), env.get("SLURM_NODEID", "")
    if not (is_whole(job) and nodelist and is_whole(nodeid)):
        return "not a task of a Slurm step (SLURM_JOB_ID, SLURM_STEP_NODELIST, SLURM_NODEID unset)"
    names = commands.run(["scontrol", "show", "hostnames", nodelist])
    nodes = tuple(names.out.split()) if names.ok else ()
    if not nodes:
        return f"`scontrol show hostnames {nodelist}` gave no node: {names.said or 'rc ' + str(names.rc)}"
    index = int(nodeid)
    if index >= len(nodes):
        return f"SLURM_NODEID={index} but the step has {len(nodes)} node(s): {', '.join(nodes)}"
    shown = commands.run(["scontrol", "-o", "show", "node", nodes[0]])
    addr = commands.keyvalues(shown.out).get("NodeAddr") if shown.ok else None
    return Step(job, step, nodes, index, addr or nodes[0])
