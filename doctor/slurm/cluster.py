"""What the cluster offers: partitions (`scontrol show partition`) and their nodes (`sinfo -N`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor.numbers import is_whole, whole
from dfdoctor.slurm import commands


@dataclass
class Node:
    name: str
    cpus: int
    memory_mib: int
    gpus: int
    state: str


@dataclass
class Partition:
    name: str
    fields: dict[str, str]
    nodes: list[Node] = field(default_factory=list)

    @property
    def total_nodes(self) -> int:
        return int(self.fields.get("TotalNodes", "0") or 0)

    def limit(self, key: str) -> Optional[int]:
        v = self.fields.get(key, "UNLIMITED")
        return whole(v)


def partitions() -> tuple[dict[str, Partition], Optional[str], Optional[str]]:
    """(partitions by name, the default partition's name, an error in Slurm's words or None)."""
    a = commands.run(["scontrol", "-o", "show", "partition"])
    if not a.ok:
        return {}, None, a.said or f"scontrol exited {a.rc}"
    parts = {}
    default = None
    for rec in commands.records(a.out):
        name = rec.get("PartitionName", "")
        parts[name] = Partition(name, rec)
        if rec.get("Default") == "YES":
            default = name
    s = commands.run(["sinfo", "-h", "-N", "-o", "%P|%N|%c|%m|%G|%t"])
    for line in s.out.splitlines() if s.ok else []:
        pname, node, cpus, mem, gres, state = (line.split("|") + [""] * 6)[:6]
        p = parts.get(pname.rstrip("*"))
        if p is not None:
            p.nodes.append(Node(node, _int(cpus), _int(mem), _gpus(gres), state))
    return parts, default, None


def _int(s: str) -> int:
    m = re.match(r"\d+", s or "")
    return int(m[0]) if m else 0


def _gpus(gres: str) -> int:
    """GPUs in a node's Gres (`gpu:4`, `gpu:a100:8(S:0-1)`); 0 for `(null)`."""
    total = 0
    for part in gres.split(","):
        bits = part.split("(")[0].split(":")
        if bits[0] == "gpu":
            total += whole(bits[-1], 0)
    return total


def minutes(spec: str) -> Optional[float]:
    """A Slurm time (`30`, `1:30:00`, `2-00:00:00`, `UNLIMITED`) in minutes; None for unlimited/unreadable."""
    if not spec or spec.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days = 0
    if "-" in spec:
        d, _, spec = spec.partition("-")
        days = whole(d, 0)
        parts = [int(x) for x in spec.split(":") if is_whole(x)]
        h, m, s = (parts + [0, 0, 0])[:3]
        return days * 1440 + h * 60 + m + s / 60
    parts = [int(x) for x in spec.split(":") if is_whole(x)]
    if len(parts) == 1:
        return float(parts[0])
    if len(parts) == 2:
        return parts[0] + parts[1] / 60
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + parts[2] / 60
    return None


def mem_mib(spec: str) -> Optional[int]:
    """`--mem` (`100M`, `4G`, `2048` = MiB) in MiB."""
    m = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)B?$", (spec or "").strip(), re.I)
    if not m:
        return None
    return int(float(m[1]) * 1024 ** ("KMGT".index(m[2].upper() or "M") - 1))
