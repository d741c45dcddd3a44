"""The checks of an sbatch submission (docs/slurm.md), declared like every other check: listed by list-checks,
chosen by --only/--skip, run by the runner under its timeout, silenced by the config, named in every output
format. They run only for an sbatch submission (scope "slurm"), whose check/launch runs them."""

from __future__ import annotations

from dfdoctor.model import Result, ok, skip
from dfdoctor.registry import check
from dfdoctor.slurm import named_output, precheck, session


@check("slurm.submission", title="What sbatch makes of the submission", scope="slurm", timeout=30)
def slurm_submission(ctx) -> list[Result]:
    """sbatch's own answer (--test-only), the options and where each came from, the #SBATCH lines it ignores."""
    return precheck.submission(session.submission(ctx), session.asked(ctx))


@check("slurm.partition", title="The request against the partition", scope="slurm", timeout=30)
def slurm_partition(ctx) -> list[Result]:
    """The partition's limits, explaining what sbatch accepted or refused."""
    return precheck.fits(session.submission(ctx), session.asked(ctx))


@check("slurm.output", title="Output folders where the job runs", scope="slurm",
       timeout=precheck.SRUN_IMMEDIATE_S + 30)
def slurm_output(ctx) -> list[Result]:
    """--output/--error folders and --chdir, looked at on a node of the partition; an --output that is a file the
    job names (its script: Slurm would write over it) first."""
    sub = session.submission(ctx)
    return named_output.finding(sub, ctx.cwd) + precheck.folders_where_it_runs(sub, ctx.cwd)


@check("slurm.gpus", title="GPUs against torchrun", scope="slurm", timeout=10)
def slurm_gpus(ctx) -> list[Result]:
    """GPUs per node asked for against torchrun's --nproc_per_node in the script (a reading: at most a warning)."""
    return precheck.gpus_vs_torchrun(session.submission(ctx))


@check("slurm.training", title="The training command's checks on a node", scope="slurm",
       timeout=precheck.NODE_CHECKS_TIMEOUT_S + 30)
def slurm_training(ctx) -> list[Result]:
    """The usual checks of the script's training command, run on a node with the job's environment; their
    records travel in `data.node_records` and take their own rows once the runner has them."""
    records = precheck.training_checks_on_node(session.submission(ctx), ctx.cwd, dict(ctx.env))
    if len(records) == 1 and records[0].id == "slurm.training":
        r = records[0]
        return [Result(r.status, r.summary, r.cause, fix=r.fix, evidence=tuple(r.evidence))]
    node = next((r.data.get("node") for r in records if r.data.get("node")), "?")
    return [ok(f"{len(records)} check(s) of the training command ran on node {node}.",
               data={"node_records": [r.to_dict() for r in records]})]


@check("slurm.nodes", title="Checks on every node (check --slurm-nodes)", scope="slurm-nodes", timeout=600)
def slurm_nodes(ctx) -> list[Result]:
    """The record `check --slurm-nodes N` gives about its own srun (N nodes that can never be had, a node whose
    dfdoctor gave no report); declared here so it is listed, selectable and silenceable."""
    return [skip("runs as `dfdoctor check --slurm-nodes N|all -- COMMAND`")]
