"""Slurm as a placement (`dfdoctor.placing`): an sbatch line or `--launcher job.sbatch`, `slurm:JOBID`, and the
run folders `launch -- sbatch` made. Each answer is the Slurm package's own (orchestrate.py, stop.py); the heavy
modules are imported when asked, so `dfdoctor --help` does not load the launch pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from dfdoctor.errors import UsageError
from dfdoctor.numbers import is_whole
from dfdoctor.placing import LaunchAsk, Placement
from dfdoctor.slurm.sbatch import is_slurm


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

    def check(self, ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
        from dfdoctor.slurm import orchestrate  # start-up: it brings the launch pipeline
        return orchestrate.check_records(ctx, only, skip, cfg)

    def launch(self, ctx: Any, ask: LaunchAsk) -> Any:
        from dfdoctor.slurm import orchestrate
        return orchestrate.launch(ctx, watch_s=ask.watch_s, run_dir=ask.run_dir, force=ask.force,
                                  no_check=ask.no_check, only=ask.only, skip=ask.skip, cfg=ask.cfg,
                                  settle_s=ask.settle_s)

    def status(self, cwd: Path, ref: Optional[str], watch_s: float) -> Any:
        from dfdoctor.slurm import orchestrate
        return orchestrate.status(cwd, ref, watch_s)

    def stop(self, job_id: str, grace_s: float, spec: Optional[dict[str, Any]] = None) -> Any:
        from dfdoctor.slurm import stop
        return stop.scancel(job_id, grace_s)


SLURM = Slurm()
