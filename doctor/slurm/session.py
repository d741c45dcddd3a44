"""The sbatch submission a Context names, read once per process: the Slurm checks run in forked workers
(dfdoctor.runner), and a submission read (and `sbatch --test-only` asked) in the parent before they start is
inherited by every one of them, so sbatch is asked once."""

from __future__ import annotations

from typing import Optional

from dfdoctor.context import Context
from dfdoctor.slurm import precheck, sbatch, testonly

_READ: dict[tuple, sbatch.Submission] = {}


def _key(ctx: Context) -> tuple:
    return tuple(ctx.command), str(ctx.launcher), str(ctx.cwd)


def submission(ctx: Context) -> sbatch.Submission:
    """The submission: `-- sbatch ...`, or `--launcher job.sbatch`."""
    key = _key(ctx)
    if key not in _READ:
        if sbatch.is_sbatch(ctx.command):
            _READ[key] = sbatch.parse(ctx.command, ctx.cwd, ctx.env)
        else:
            _READ[key] = sbatch.from_script(ctx.launcher, ctx.cwd, ctx.env)
    return _READ[key]


def asked(ctx: Context) -> Optional[testonly.Asked]:
    """What `sbatch --test-only` answered for it (asked at the first call)."""
    return precheck.ask_once(submission(ctx), ctx.cwd, dict(ctx.env))
