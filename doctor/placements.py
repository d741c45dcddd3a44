"""The registered placements (`dfdoctor.placing`), and the three questions the commands ask of them: whose is
this launch line, this `status`/`stop` reference, this run folder. None: the job runs on this machine or a
--target, the pipeline of `launch/orchestrate.py`. Adding a placement: a subpackage with a `Placement` subclass
and its instance in ALL (docs/architecture.md, "Adding things")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from dfdoctor.agent.names import SPEC
from dfdoctor.placing import Placement
from dfdoctor.ray.placement import RAY
from dfdoctor.run.folder import RunNotFound, find_run
from dfdoctor.slurm.placement import SLURM

ALL: tuple[Placement, ...] = (SLURM, RAY)


def of_line(ctx: Any) -> Optional[Placement]:
    """The placement whose launch line (or --launcher) `ctx` holds."""
    return next((p for p in ALL if p.claims(ctx)), None)


def through_target(spec: Optional[str], command: list[str]) -> tuple[Optional[str], list[str]]:
    """A `--target` that names a placement's cluster (`ray://HEAD`) is no machine: (no target, the placement's
    own line for the command). Any other: (it, the command) as given."""
    scheme = (spec or "").partition("://")[0].lower()
    placement = next((p for p in ALL if p.target_scheme and "://" in (spec or "") and p.target_scheme == scheme),
                     None)
    if placement is None:
        return spec, command
    return None, placement.line_for_target(str(spec), command)


def of_prefix(ref: Optional[str]) -> Optional[Placement]:
    """The placement a `PREFIX:JOB_ID` reference names (`slurm:42`)."""
    if not ref or ":" not in ref:
        return None
    prefix = ref.split(":", 1)[0]
    return next((p for p in ALL if p.name == prefix), None)


def of_spec(spec: dict[str, Any]) -> Optional[Placement]:
    """The placement that made a run folder (its spec)."""
    return next((p for p in ALL if p.claims_spec(spec)), None)


def of_ref(cwd: Path, ref: Optional[str]) -> Optional[Placement]:
    """Whose `status REF` is: a `PREFIX:ID`, or a run folder a placement's launch made."""
    named = of_prefix(ref)
    if named is not None:
        return named
    try:
        return of_spec(json.loads((find_run(cwd, ref) / SPEC).read_text()))
    except (RunNotFound, OSError, ValueError):
        return None
