"""The registered placements (`dfdoctor.placing`), and the questions the commands ask of them: whose is this
launch line, this `status`/`stop` reference, this run folder. Asked in order: the schedulers first (an sbatch line
is Slurm's wherever it is typed), then a --target of any kind, then this machine, which takes what no other does.
Adding a placement: a subpackage with a `Placement` subclass and its instance in ALL (docs/architecture.md,
"Adding things")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from dfdoctor.agent.names import SPEC
from dfdoctor.launch.places import HERE, TARGET
from dfdoctor.placing import Placement
from dfdoctor.ray.placement import RAY
from dfdoctor.run.folder import RunNotFound, find_run
from dfdoctor.slurm.placement import SLURM

ALL: tuple[Placement, ...] = (SLURM, RAY, TARGET, HERE)


def check_options(command: Callable) -> Callable:
    """`dfdoctor check` with every placement's own options (`Placement.check_options`), in ALL's order."""
    for placement in reversed(ALL):
        for option in reversed(placement.check_options()):
            command = option(command)
    return command


def check_instead(opts: dict[str, Any], command: list[str], started: str) -> Optional[tuple[Any, str]]:
    """The report (and --fail-on level) of a `check` a placement's own option asked for; None: none did."""
    return next((done for done in (p.check_instead(opts, command, started) for p in ALL) if done is not None),
                None)


def of_line(ctx: Any) -> Placement:
    """The placement whose launch line (or --launcher, or --target) `ctx` holds."""
    return next((p for p in ALL if p.claims(ctx)), HERE)


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
    return next((p for p in ALL if p.name and p.name == prefix), None)


def of_spec(spec: dict[str, Any]) -> Placement:
    """The placement that made a run folder (its spec)."""
    return next((p for p in ALL if p.claims_spec(spec)), HERE)


def of_ref(cwd: Path, ref: Optional[str]) -> Placement:
    """Whose `status REF` is: a `PREFIX:ID`, or the placement that made the run folder REF names (none found or
    readable: this machine's, whose status says so in its own words)."""
    named = of_prefix(ref)
    if named is not None:
        return named
    try:
        return of_spec(json.loads((find_run(cwd, ref) / SPEC).read_text()))
    except (RunNotFound, OSError, ValueError):
        return HERE
