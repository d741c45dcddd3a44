"""This machine and a --target as placements (`dfdoctor.placing`): the job started under dfdoctor's flight
recorder, here or shipped to the target and detached there, its record read back and judged by the same rules.
Every target kind (ssh, pct, lxc, docker, ...) is the one `Target` placement: how to reach the machine is the
kind's class (`targets/kinds/`), never a branch here. The answers are `recorded.py`'s, imported when asked, so
`dfdoctor --help` and `check` do not load the launch pipeline at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Optional

from dfdoctor.errors import UsageError
from dfdoctor.placing import Placement

if TYPE_CHECKING:  # annotations only: the answers are made where they are built (placing_answers.py)
    from dfdoctor.placing_answers import Judged, LaunchAsk, Started, Stopped


def _recorded() -> Any:
    from dfdoctor.launch import recorded  # start-up: see the module docstring
    return recorded


class _Recorded(Placement):
    """What this machine and a --target share: dfdoctor's own checks, its recorder, its run folders."""

    not_started_words = {"not_done": "Not launched", "subject": "the launch", "force": "--force launches anyway"}
    sigterm_ends_watch = True  # the job runs on without dfdoctor: SIGTERM ends the watch, the verdict is printed

    def claims_spec(self, spec: dict[str, Any]) -> bool:
        from dfdoctor.context import Context
        from dfdoctor.targets import parse_target
        try:
            return self.claims(Context(target=parse_target(spec.get("target"))))
        except ValueError:
            return False

    def check(self, ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
        from dfdoctor.launch import checked  # start-up: `check` runs the checks, never the launch pipeline
        return checked.check(ctx, only, skip, cfg)

    def prepare(self, ctx: Any, ask: LaunchAsk) -> LaunchAsk:
        return _recorded().prepare(ask)

    def pre_checks(self, ctx: Any, ask: LaunchAsk) -> list:
        return _recorded().pre_checks(ctx, ask)

    def blockers(self, ctx: Any, records: list) -> list:
        return _recorded().blockers(ctx, records)

    def finish(self, ctx: Any, report: Any) -> None:
        _recorded().finish(ctx, report)

    def status(self, cwd: Path, ref: Optional[str], watch_s: float, cfg: Any = None,
               only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> Any:
        return _recorded().status(cwd, ref, watch_s, cfg, only, skip)

    def run_folders(self, cwd: Path, ref: Optional[str]) -> tuple[Path, ...]:
        return _recorded().run_folders(cwd, ref)

    def connected_to_run(self, cwd: Path, ref: Optional[str]) -> ContextManager[Any]:
        return _recorded().connected_to_run(cwd, ref)


class Here(_Recorded):
    """This machine: the recorder started detached here, in its own session."""

    def claims(self, ctx: Any) -> bool:
        return ctx.target.runs_here

    def prepare(self, ctx: Any, ask: LaunchAsk) -> LaunchAsk:
        if ask.strategy != "auto":
            raise UsageError("--strategy applies to a job on a --target; a local launch always detaches itself")
        return super().prepare(ctx, ask)

    def start(self, ctx: Any, ask: LaunchAsk, timeline: list) -> Started:
        return _recorded().start_here(ctx, ask)

    def watch(self, ctx: Any, ask: LaunchAsk, job: Started, records: list, timeline: list) -> Judged:
        return _recorded().watch_here(ctx, ask, job, records)

    def stop_run(self, run_dir: Path, run: Any, grace_s: float) -> Stopped:
        return _recorded().stop_here(run_dir, run, grace_s)


class Target(_Recorded):
    """A --target of any kind: the recorder shipped there over the kind's transport and detached there; the run
    folder here is a local copy of the record, read back through the same transport."""

    def claims(self, ctx: Any) -> bool:
        return not ctx.target.runs_here

    def meanwhile(self, ctx: Any, ask: LaunchAsk) -> None:
        if not ask.no_check:  # the checks are imported while ssh logs in (`connected`, next)
            from dfdoctor.launch import gated  # start-up: see _recorded
            asked = self.prepare(ctx, ask)  # the selection pre_checks will be given (prepare again, same answer)
            gated.load_meanwhile(asked.only, asked.skip, also=_recorded)

    def connected(self, ctx: Any) -> ContextManager[Any]:
        return _recorded().connected_there(ctx)

    def start(self, ctx: Any, ask: LaunchAsk, timeline: list) -> Started:
        return _recorded().start_there(ctx, ask)

    def watch(self, ctx: Any, ask: LaunchAsk, job: Started, records: list, timeline: list) -> Judged:
        return _recorded().watch_there(ctx, ask, job, records)

    def stop_run(self, run_dir: Path, run: Any, grace_s: float) -> Stopped:
        return _recorded().stop_there(run_dir, run, grace_s)


HERE = Here()
TARGET = Target()
