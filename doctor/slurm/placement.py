"""Slurm as a placement (`dfdoctor.placing`): an sbatch line or `--launcher job.sbatch`, `slurm:JOBID`, and the
run folders `launch -- sbatch` made. Each answer is the Slurm package's own (orchestrate.py, stop.py); the launch
sequence that asks them is `launch/pipeline.py`'s. The heavy modules are imported when asked, so `dfdoctor --help`
does not load the launch pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from dfdoctor.errors import UsageError
from dfdoctor.numbers import is_whole
from dfdoctor.placing import Placement
from dfdoctor.slurm.sbatch import is_slurm

if TYPE_CHECKING:  # annotations only: the answers are made where they are built (placing_answers.py)
    from dfdoctor.placing_answers import Judged, LaunchAsk, Started


class Slurm(Placement):
    name = "slurm"
    where = "in Slurm"
    submitter = "sbatch"

    def claims(self, ctx: Any) -> bool:
        return is_slurm(ctx)

    def job_of(self, ref: str) -> str:
        job_id = ref.split(":", 1)[1]
        if not is_whole(job_id) or int(job_id) <= 0:
            raise UsageError(f"{ref}: a Slurm job id is a number, 1 or more (slurm:12345)")
        return job_id

    def check_options(self) -> list:
        import click  # start-up: only the CLI asks
        return [click.option("--slurm-nodes", default=None, metavar="N|all",
                             help="Run the checks on every node of a Slurm allocation through one "
                                  "`srun --ntasks-per-node=1`: N nodes of a new allocation, or `all` inside "
                                  "salloc/a batch job; a row per node.")]

    def check_instead(self, opts: dict[str, Any], command: list[str], started: str) -> Optional[tuple[Any, str]]:
        if not opts.get("slurm_nodes"):
            return None
        from dfdoctor.slurm import nodes
        return nodes.check_report(opts, command, started)

    def check(self, ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
        from dfdoctor.slurm import orchestrate  # start-up: it brings the launch pipeline
        return orchestrate.check_records(ctx, only, skip, cfg)

    def prepare(self, ctx: Any, ask: LaunchAsk) -> LaunchAsk:
        from dfdoctor.slurm import orchestrate
        orchestrate.submission_of(ctx)  # read before the checks: a line sbatch cannot take is bad usage first
        return ask

    def start(self, ctx: Any, ask: LaunchAsk, timeline: list) -> Started:
        from dfdoctor.slurm import orchestrate
        return orchestrate.start(ctx, ask, timeline)

    def watch(self, ctx: Any, ask: LaunchAsk, job: Started, records: list, timeline: list) -> Judged:
        from dfdoctor.slurm import orchestrate
        return orchestrate.watch_job(ctx, ask, job, timeline)

    def output_instead_of_log(self, ctx: Any, run: dict[str, Any]) -> Any:
        from dfdoctor.slurm import orchestrate
        return orchestrate.output_instead_of_log(ctx, run)

    def status(self, cwd: Path, ref: Optional[str], watch_s: float, cfg: Any = None,
               only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> Any:
        from dfdoctor.slurm import orchestrate
        return orchestrate.status(cwd, ref, watch_s)

    def stop(self, job_id: str, grace_s: float, spec: Optional[dict[str, Any]] = None) -> Any:
        from dfdoctor.slurm import stop
        return stop.scancel(job_id, grace_s)


SLURM = Slurm()
