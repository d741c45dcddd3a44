"""`check` on every node of an allocation at once: one `srun --ntasks-per-node=1` runs dfdoctor's checks on
each node, each node writes its JSON report to its own file (srun's `--output=%n`, the node's index in the step:
`%N` is the node's *host* name, which two nodes of one host share), and the reports become one report with a
row per node, named by the Slurm node name each report carries (the rows model of dfdoctor.rows: which node
differs, and how). The same srun tells cuda.nccl to form one group over every node's ranks (step.ACROSS_NODES)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor import causes
from dfdoctor.config import Config, apply_silences
from dfdoctor.config import load as load_config
from dfdoctor.errors import UsageError
from dfdoctor.model import CheckRecord, Report, Status, TargetRow, Verdict
from dfdoctor.numbers import whole
from dfdoctor.slurm import cluster, commands, step, testonly

SRUN_IMMEDIATE_S = 30
SRUN_LIMIT_S = 600.0  # the whole srun over the nodes (slurm.nodes' timeout)
ROW_PREFIX = "node:"
# Each task first says which node it is on (its stderr file's first line), so a node whose dfdoctor could not
# even start is still named; the arguments pass through "$@", never through the shell's parser.
NAME_THEN_RUN = ("/bin/sh", "-c", 'echo "${SLURMD_NODENAME:-$(hostname -s)}" >&2; exec "$@"', "dfdoctor-node")


def forwarded(opts: dict) -> list[str]:
    """The `check` options that describe the launch, for the dfdoctor run on each node."""
    args: list[str] = []
    for name in ("log", "shell_command", "launcher", "cwd", "python", "timeout"):
        if opts.get(name) is not None:
            args += [f"--{name.replace('_', '-')}", str(opts[name])]
    for name in ("requirements", "only", "skip"):
        for v in opts.get(name) or ():
            args += [f"--{name}", str(v)]
    if opts.get("require_gpu"):
        args.append("--require-gpu")
    return args


def srun_argv(nodes: str, folder: Path, check_args: list[str], partition: Optional[str] = None) -> list[str]:
    """The one srun: inside an allocation (`all`) over its nodes, else a new allocation of N nodes."""
    argv = ["srun", "--ntasks-per-node=1", "-J", "dfdoctor-nodes", "--kill-on-bad-exit=0",
            f"--output={folder}/%n.json", f"--error={folder}/%n.err"]
    if nodes != "all":
        argv += [f"-N{nodes}", f"--immediate={SRUN_IMMEDIATE_S}", "--mem=2G"]
        if partition:
            argv.append(f"--partition={partition}")
    elif os.environ.get("SLURM_JOB_NUM_NODES"):
        argv.append(f"-N{os.environ['SLURM_JOB_NUM_NODES']}")
    return argv + [*NAME_THEN_RUN, sys.executable, "-m", "dfdoctor", "check", "--format", "json", *check_args]


def check_nodes(nodes: str, check_args: list[str], cwd: Path, fail_on_level: str, verdict_from_checks,
                partition: Optional[str] = None, timeout: Optional[float] = None
                ) -> tuple[list[TargetRow], list[CheckRecord], commands.Answer, float]:
    """Run the checks on every node; (rows, records each tagged with its row, what srun said, seconds). The
    project's config (in `cwd`) applies as to any check: `[checks."slurm.nodes"] timeout` bounds the srun (600 s
    unless set) and its silences mark the records."""
    cfg = load_config(cwd)
    rows, records, answer, took = _check_nodes(nodes, check_args, cwd, fail_on_level, verdict_from_checks,
                                               partition, timeout or _limit(cfg))
    apply_silences(records, cfg.silences)
    for row in rows:  # a row of dfdoctor's own (no node answered) is judged again with the silences applied
        if row.target == "slurm":
            row.verdict = verdict_from_checks([r for r in records if r.target == "slurm"], fail_on_level)
    return rows, records, answer, took


def _limit(cfg: Config) -> float:
    per_check = ((cfg.get("checks") or {}).get("slurm.nodes") or {}).get("timeout")
    try:
        return float(per_check) if per_check else SRUN_LIMIT_S
    except (TypeError, ValueError):
        return SRUN_LIMIT_S


def _check_nodes(nodes: str, check_args: list[str], cwd: Path, fail_on_level: str, verdict_from_checks,
                 partition: Optional[str], timeout: float
                 ) -> tuple[list[TargetRow], list[CheckRecord], commands.Answer, float]:
    if nodes == "all" and not os.environ.get("SLURM_JOB_ID"):
        raise UsageError("--slurm-nodes all runs inside an allocation (salloc, or a batch job); outside one give "
                         "a node count: --slurm-nodes N")
    if nodes != "all":
        refused = _never_allocated(nodes, partition)
        if refused is not None:
            return [TargetRow("slurm", Verdict("failed", refused.cause, refused.summary, refused.fix), {}, 0.0)], \
                [refused], commands.Answer((), 1, "", refused.summary), 0.0
    # A folder every node can write: under the working directory, which a cluster shares with its nodes.
    base = cwd / ".dfdoctor"
    base.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="nodes-", dir=base))
    t0 = time.monotonic()
    try:
        answer = commands.run(srun_argv(nodes, folder, check_args, partition), timeout=timeout,
                              env=dict(os.environ, **{step.ACROSS_NODES: "1"}))
        rows, records = [], []
        for path in sorted(folder.glob("*.json"), key=lambda p: whole(p.stem, -1)):
            row, recs = _row(path, folder / f"{path.stem}.err", fail_on_level, verdict_from_checks)
            rows.append(row)
            records += recs
        took = time.monotonic() - t0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not rows:
        rec = CheckRecord(id="slurm.nodes", phase="pre", status=Status.ERROR, title="Checks on the nodes",
                          summary=f"srun ran the checks on no node: {answer.said or 'rc ' + str(answer.rc)}",
                          fix=f"Run the srun by hand to see why: {shlex.join(answer.argv)}",
                          evidence=[shlex.join(answer.argv)])
        rows = [TargetRow("slurm", Verdict("failed", None, rec.summary, rec.fix), {}, round(took, 3))]
        rec.target = "slurm"
        records = [rec]
    return rows, records, answer, took


def _never_allocated(nodes: str, partition: Optional[str]) -> Optional[CheckRecord]:
    """Ask `srun --test-only` whether N nodes can ever be had: a cluster smaller than N is said at once, with
    the numbers, rather than after srun's --immediate wait as "nodes are busy"."""
    argv = ["srun", "--test-only", f"-N{nodes}", "--ntasks-per-node=1", "--mem=2G"]
    if partition:
        argv.append(f"--partition={partition}")
    asked = testonly.Asked(commands.run(argv))
    if not asked.never_starts:
        return None
    parts, default, _ = cluster.partitions()
    p = parts.get((partition or default or "").split(",")[0])
    have = f"partition {p.name} has {p.total_nodes} node(s)" if p else "the cluster has fewer"
    rec = CheckRecord(id="slurm.nodes", phase="pre", status=Status.FAIL, title="Checks on the nodes",
                      summary=f"--slurm-nodes {nodes}: Slurm can never give {nodes} node(s) at once; {have} "
                              f"(srun --test-only: {asked.words}).",
                      fix=f"Ask for at most {p.total_nodes if p else 'as many'} node(s): "
                          f"--slurm-nodes {p.total_nodes if p else 'N'} (`sinfo -s` lists the partitions).",
                      cause=causes.NEVER_STARTS, evidence=[shlex.join(argv)])
    rec.target = "slurm"
    return rec


def _row(path: Path, err: Path, fail_on_level: str, verdict_from_checks) -> tuple[TargetRow, list[CheckRecord]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        doc = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        node = _node_named_in(err) or f"node {path.stem} of the step"
        name = ROW_PREFIX + node
        said = err.read_text(errors="replace")[-2000:] if err.exists() else ""
        rec = CheckRecord(id="slurm.nodes", phase="pre", status=Status.ERROR, title="Checks on this node",
                          summary=f"dfdoctor's checks on {node} gave no report", details=said, target=name)
        return TargetRow(name, Verdict("failed", None, rec.summary), {}, 0.0), [rec]
    environment = doc.get("environment") or {}
    node = str(environment.get("slurm_node") or environment.get("host") or path.stem)
    name = ROW_PREFIX + node
    records = [CheckRecord.from_dict(d) for d in doc.get("checks") or []]
    for r in records:
        r.target = name
    env = {k: v for k, v in environment.items() if k not in ("os", "dfdoctor_python", "slurm_node")}
    took = sum(r.duration_s for r in records)
    return TargetRow(name, verdict_from_checks(records, fail_on_level), env, round(took, 3)), records


def _node_named_in(err: Path) -> Optional[str]:
    """The node's name, which each task writes first to its stderr file (see NAME_THEN_RUN)."""
    try:
        with err.open(errors="replace") as f:
            first = f.readline().strip()
    except OSError:
        return None
    return first if first and " " not in first else None


def check_report(opts: dict, command: list[str], started: str) -> tuple[Any, str]:
    """`check --slurm-nodes`: the checks on every node of an allocation, one row per node; the report and the
    --fail-on level."""
    from dfdoctor import __version__
    from dfdoctor.engine import environment_facts, now_iso, target_option, verdict_from_checks
    from dfdoctor.rows import verdict_over_rows
    nodes_opt = opts["slurm_nodes"]
    if nodes_opt != "all" and whole(nodes_opt, 0) < 1:
        raise UsageError(f"--slurm-nodes {nodes_opt}: a node count (2) or `all`")
    if not all(target_option(spec).runs_here for spec in opts.get("target") or ()):
        raise UsageError("--slurm-nodes runs on the allocation's nodes; it takes no --target")
    level = opts.get("fail_on") or "error"
    rows, records, answer, _ = check_nodes(nodes_opt, forwarded(opts) + ["--", *command],
                                           Path(opts.get("cwd") or ".").resolve(), level, verdict_from_checks)
    report = Report(tool_version=__version__, target=f"slurm ({len(rows)} node(s))", command=command,
                    started_at=started, finished_at=now_iso(), verdict=verdict_over_rows(rows), checks=records,
                    timeline=[], environment=environment_facts(None, []), mode="check", targets=rows)
    return report, level
