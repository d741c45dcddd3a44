"""`--log` given to a launch that never opens it: a Slurm submission (Slurm writes where sbatch's --output says)
and a `ray job submit` line (the driver's output stays in Ray's logs). The user's --log was silently ignored and
they looked for a log that never appeared. Said as a warning row of its own (log.writable, the check about
--log), in `check` and in every launch report, never a failure: the job itself is fine. Where the output goes
instead is the placement's answer (`Placement.output_instead_of_log`)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Optional

from dfdoctor.model import CheckRecord, Status

CHECK_ID = "log.writable"  # the check about --log: `--skip log.writable` leaves this row out too


def records(placement: Any, ctx: Any, skip: tuple[str, ...] = (), run: Optional[dict[str, Any]] = None) -> list:
    """The warning row, when --log is given to a placement that does not write it; [] otherwise (--no-redirect:
    the job writes --log itself, so it is not dfdoctor's to open). --skip log.writable leaves it out."""
    if ctx.log is None or ctx.no_redirect or any(fnmatch.fnmatchcase(CHECK_ID, p) for p in skip):
        return []
    instead = placement.output_instead_of_log(ctx, run or {})
    if not instead:
        return []
    return [CheckRecord(CHECK_ID, "pre", Status.WARN, f"--log {ctx.log} is not used: {instead.where}",
                        fix=instead.fix, title="--log not used by this launch",
                        evidence=[f"dfdoctor opens no --log for a {placement.submitter} launch: nothing is written "
                                  f"to {ctx.log}"],
                        data={"log_not_used": {"log": str(ctx.log), "output": instead.where}})]


@dataclass(frozen=True)
class Instead:
    """Where a placement's job writes its output instead of --log (`where`), and how to read it (`fix`)."""

    where: str
    fix: str
