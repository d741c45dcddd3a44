"""How checks are declared and found: a decorator to declare one, entry points to find them all.

Every check, built-in or third-party, is found the same way: an entry point in the group `dfdoctor.checks`
whose object is a `Check` (what `@check` returns). A third-party check is therefore a pip-installable
distribution with one line of metadata.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from dfdoctor.model import Result, Status

ENTRY_POINT_GROUP = "dfdoctor.checks"
# dfdoctor's own distribution, as setup.cfg names it: its checks are built-in. Never `dfdoctor`: that name on the
# package index is another project, whose entry points must not pass for ours.
DISTRIBUTION = "dfdoctor-launch"
_OWN_NAMES = {DISTRIBUTION, DISTRIBUTION.replace("-", "_")}
PHASES = ("pre", "post")
# The built-in checks that run after a launch. `launch` and `status` load only these of dfdoctor's own (a plugin's
# are all loaded: its phases are known once imported): importing every built-in check to find them was 0.05 of
# the CPU-seconds of each (issue 45). tests/test_registry_phases.py holds it to the checks' own `phases`.
BUILT_IN_POST = frozenset({"job.leftovers", "job.resources", "log.writable", "target.reachable"})
# The built-in checks of another scope than "any" (a Slurm submission's: `check -- sbatch ...` loads them all
# through slurm/orchestrate.py): a caller that selects scope "any" leaves them unloaded (their module and the Slurm
# readers it imports were 0.004 CPU-s of every check and launch). tests/test_registry_phases.py holds it to the
# checks' own `scope`.
BUILT_IN_OTHER_SCOPES = frozenset({"slurm.submission", "slurm.partition", "slurm.output", "slurm.gpus",
                                   "slurm.training", "slurm.nodes"})

CheckFunc = Callable[..., Union[Iterable[Result], Result, None]]


@dataclass(frozen=True)
class Check:
    """A declared check: a dotted id, a title, the phases it runs in, its default timeout and its function.
    `imports_torch`: its probes import torch in the training interpreter, so a phase that runs it keeps one
    interpreter that has imported torch for every probe to fork from (`dfdoctor.probe_server`)."""

    id: str
    title: str
    phases: tuple[str, ...]
    timeout: float
    func: CheckFunc
    source: str = "built-in"
    imports_torch: bool = False
    # "any": every launch; "slurm": only an sbatch submission (docs/slurm.md), which runs them itself;
    # "slurm-nodes": the record `check --slurm-nodes` gives about its srun (listed, never run by the runner).
    scope: str = "any"
    # Why the check does not apply, read from the context alone (no file, no process, no network), else None. The
    # runner asks it before it forks a worker: a check that cannot apply costs no process (most of a local
    # `check`'s are skipped: no --log, no --target, no launch line).
    not_applicable: Optional[Callable[..., Optional[str]]] = None
    # What a slow check is doing, for the progress line while it runs ("" for a quick one, whose id says enough)
    doing: str = ""
    # Whether a finding of it can stop a launch (a cause of causes.LAUNCH_BLOCKERS, one foretold.certain reads, or
    # imports.smoke's start). A launch on a --target waits for these before its start; one that cannot stop it
    # (False: declared so only where every cause it gives is known) finishes beside the start, its record the same.
    gates: bool = True

    def skip_for(self, ctx) -> Optional[Result]:
        """The skip of a check that says it does not apply to `ctx` (`not_applicable`), else None."""
        why = self.not_applicable(ctx) if self.not_applicable else None
        return Result(Status.SKIP, str(why)) if why else None

    def run(self, ctx) -> list[Result]:
        """Call the check and collect what it yields (a generator, a single Result, or None)."""
        skipped = self.skip_for(ctx)
        if skipped:
            return [skipped]
        out = self.func(ctx)
        if out is None:
            return []
        if isinstance(out, Result):
            return [out]
        return list(out)


SCOPES = ("any", "slurm", "slurm-nodes")


def check(id: str, *, title: str, phases: Iterable[str] = ("pre",), timeout: float = 30.0,
          scope: str = "any", imports_torch: bool = False,
          not_applicable: Optional[Callable[..., Optional[str]]] = None,
          doing: str = "", gates: bool = True) -> Callable[[CheckFunc], Check]:
    """Declare a check. The function takes a `Context` and yields `Result`s (see `dfdoctor.model`).
    `not_applicable(ctx)`: why it does not apply (said as its skip, without a worker process), else None.
    `gates=False`: none of its findings can stop a launch (see Check.gates)."""
    if scope not in SCOPES:
        raise ValueError(f"check {id}: scope must be one of {SCOPES}, got {scope!r}")
    phases = tuple(phases)
    bad = [p for p in phases if p not in PHASES]
    if bad or not phases:
        raise ValueError(f"check {id}: phases must be a non-empty subset of {PHASES}, got {phases}")
    if "." not in id:
        raise ValueError(f"check id {id!r} must be dotted, e.g. 'log.writable'")

    def wrap(func: CheckFunc) -> Check:
        return Check(id=id, title=title, phases=phases, timeout=float(timeout), func=func, scope=scope,
                     imports_torch=imports_torch, not_applicable=not_applicable, doing=doing, gates=gates)

    return wrap


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that could not be loaded; reported as an `error` result, never a crash."""

    name: str
    source: str
    error: str


def _distribution_name(ep: Any, names: dict) -> str:
    """The name of the distribution that registered `ep`. `dist.name` parses its whole METADATA file each time:
    read once per distribution (`names`), not once per check (18 parses were 0.02 s of `check`'s start, round 9)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown"
    if id(dist) not in names:
        names[id(dist)] = (dist, dist.name)  # the object is kept with its name, so its id is not reused
    return names[id(dist)][1]


def discover(phase: Optional[str] = None, only: Iterable[str] = (), skip: Iterable[str] = (),
             scope: Optional[str] = None) -> tuple[list[Check], list[BrokenPlugin]]:
    """Load every check registered under the `dfdoctor.checks` entry-point group, sorted by id. With `phase="post"`,
    dfdoctor's own checks of the other phase only are left unloaded (BUILT_IN_POST); with `only`/`skip` (globs on
    ids, as `select` reads them), and with `scope="any"` (BUILT_IN_OTHER_SCOPES), those of dfdoctor's own checks
    that `select` would drop: a caller that selects that phase's and scope's checks with the same globs gets the
    same ones. A plugin's are always loaded (its id is known, and
    a failure to load it is reported, only once it is imported)."""
    checks: dict[str, Check] = {}
    sources: dict[str, str] = {}  # check id -> the source that gave it first, loaded or left unloaded
    broken: list[BrokenPlugin] = []
    names: dict = {}
    for ep in _entry_points():
        dist = _distribution_name(ep, names)
        source = "built-in" if dist in _OWN_NAMES else dist
        if source == "built-in" and not _wanted(ep.name, phase, only, skip, scope):
            _claim(ep.name, ep.name, source, sources, broken)  # unloaded, its id still its own (named by its id)
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # a plugin that fails to import must not take dfdoctor down
            broken.append(BrokenPlugin(ep.name, source, f"{type(exc).__name__}: {exc}"))
            continue
        if not isinstance(obj, Check):
            broken.append(BrokenPlugin(ep.name, source, f"entry point {ep.value} is not a dfdoctor Check"))
            continue
        if obj.id != ep.name:  # the id is declared once: the entry point's name must be the @check id
            broken.append(BrokenPlugin(ep.name, source, f"entry point {ep.name} = {ep.value} is the check "
                                       f"@check({obj.id!r}): name the entry point {obj.id}"))
            continue
        if not _claim(obj.id, ep.name, source, sources, broken):
            continue
        checks[obj.id] = replace(obj, source=source)
    return sorted(checks.values(), key=lambda c: c.id), broken


def _wanted(check_id: str, phase: Optional[str], only: Iterable[str], skip: Iterable[str],
            scope: Optional[str] = None) -> bool:
    """Whether a built-in check (named by its entry point, which is its id) may be selected: of the phase asked
    for (post: BUILT_IN_POST), matching an `only` glob where any is given, and none of `skip`. `check --only
    imports.smoke` imported all 20 built-in checks' modules for one: 0.05 CPU-s of 0.17 (round 19, issue 45)."""
    if phase == "post" and check_id not in BUILT_IN_POST:
        return False
    if scope == "any" and check_id in BUILT_IN_OTHER_SCOPES:
        return False
    only = list(only)
    if only and not any(fnmatch.fnmatchcase(check_id, pat) for pat in only):
        return False
    return not any(fnmatch.fnmatchcase(check_id, pat) for pat in skip)


def _entry_points() -> Any:
    """The group's entry points, read by dfdoctor's own reader of the installed distributions (entrypoints.py), or
    importlib.metadata's where that reader is unsure. Neither is imported with the package: `status`, `stop`,
    `launch` before its job started and every training process that imports dfdoctor.guard never look for checks
    (0.05 CPU-s of each start, a tenth of what `launch` imported before its job started: round 14, issue 45)."""
    from dfdoctor import entrypoints
    found = entrypoints.of_group(ENTRY_POINT_GROUP)
    if found is not None:
        return found
    from importlib import metadata
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def _claim(check_id: str, name: str, source: str, sources: dict[str, str], broken: list[BrokenPlugin]) -> bool:
    """Whether `source` may give the check `check_id`: not where another source gave it first (said in `broken`)."""
    first = sources.setdefault(check_id, source)
    if first != source:
        broken.append(BrokenPlugin(name, source, f"check id {check_id} is already provided by {first}"))
        return False
    return True


def select(checks: list[Check], only: Iterable[str] = (), skip: Iterable[str] = (),
           phase: Optional[str] = None, scope: str = "any") -> list[Check]:
    """Filter checks by glob patterns on their ids, by phase, and by scope (an sbatch submission's checks run
    only for one: `scope="slurm"` picks them, the default the others)."""
    only, skip = list(only), list(skip)
    chosen = []
    for c in checks:
        if c.scope != scope:
            continue
        if phase and phase not in c.phases:
            continue
        if only and not any(fnmatch.fnmatchcase(c.id, pat) for pat in only):
            continue
        if any(fnmatch.fnmatchcase(c.id, pat) for pat in skip):
            continue
        chosen.append(c)
    return chosen


def unmatched(patterns: Iterable[str], checks: list[Check]) -> Iterator[str]:
    """The patterns that match no check id (bad usage, reported with the list of ids)."""
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(c.id, pat) for c in checks):
            yield pat
