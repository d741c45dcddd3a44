"""A --target launch's pre-launch checks, gated: the job starts once every check that can stop it has finished
(`Check.gates`); those that cannot (deps.requirements, persistence.session: none of their causes stops a launch)
begin once the job has started (`begin`: their sessions took CPU from the start's) and run on beside the watch
(runner.run_gated), and their records join before the verdict is judged, each the same as if the launch had
waited for it (issue 45: on a pct target they were most of what a checked launch did before its start).

The gate judges a copy of its records finished on their own (silences, one unreachable target, one missing
interpreter: each rests on gating checks alone); the records reported are every check's, finished together as
`run_phase` finishes them, so a record the gate never saw is rewritten by target.reachable's or imports.smoke's
finding as before."""

from __future__ import annotations

import contextlib
import copy
import threading
from typing import Any, Callable, Iterator, Optional

from dfdoctor.engine import finished
from dfdoctor.model import CheckRecord
from dfdoctor.targets import relay


class PreChecks(list):
    """The launch's pre-launch records: those of the gate until `complete` (every check's, in their order)."""

    def __init__(self, broken: list[CheckRecord], gate: list[CheckRecord], beside: Optional[Any], cfg: Any):
        super().__init__(broken + gate)
        self.broken, self.beside, self.cfg = broken, beside, cfg

    def complete(self) -> "PreChecks":
        """Every check's record, once those run beside the start have finished (at once when they have); the
        relay that carried their probes is ended then."""
        if self.beside is not None:
            beside, self.beside = self.beside, None
            self[:] = self.broken + finished(beside.records(), self.cfg)
        relay.close(wait=False)  # told to end now; waited for as the connection closes (`relay_meanwhile`)
        return self

    def begin(self) -> None:
        """The start is done: the checks that wait for it begin (forked in this thread, before the watch's)."""
        if self.beside is not None:
            self.beside.begin()

    def stop(self) -> None:
        """The launch ends without a verdict (interrupted, or an error): the checks beside it are ended, and the
        relay with what it still runs."""
        if self.beside is not None:
            beside, self.beside = self.beside, None
            beside.stop()
        relay.close()


def pre_checks(ctx: Any, checks: list, broken: list[CheckRecord], cfg: Any) -> PreChecks:
    """Run `checks` until those that gate have finished; the others go on beside (see the module's docstring).
    `broken`: the records of check plugins that could not be loaded, first (as `check` reports them)."""
    from dfdoctor.agent import ship
    from dfdoctor.progress import Progress  # start-up: launch/pipeline.py imports this module for `complete`
    from dfdoctor.runner import run_gated
    ship.bundle("probe")  # at once when _Loading made it
    progress = Progress(len(checks))
    try:
        gate, beside = run_gated(checks, ctx, "pre", progress=progress)
    finally:
        progress.close()
    return PreChecks(broken, finished(copy.deepcopy(gate), cfg), beside, cfg)


def complete(records: list) -> list:
    """`records`, every check's (a gated launch's waits for its checks beside the start; any other list is)."""
    return records.complete() if isinstance(records, PreChecks) else records


def begin(records: list) -> None:
    """After the start: the checks that do not gate begin (nothing for any other list)."""
    if isinstance(records, PreChecks):
        records.begin()


def stop(records: list) -> None:
    """End the checks still running beside a launch that ends without a verdict (nothing, for any other list)."""
    if isinstance(records, PreChecks):
        records.stop()


class _Loading:
    """The pre-launch checks of one --only/--skip, imported in a thread while ssh logs in to the target (each took
    0.2-0.3 s, one after the other, on the path to the start). Joined before any worker is forked."""

    def __init__(self, only: tuple, skip: tuple, also: Callable[[], Any]) -> None:
        self.key, self.loaded, self.also = (only, skip), None, also
        self.thread = threading.Thread(target=self._load, name="dfdoctor-checks-loading", daemon=True)
        self.thread.start()

    def _load(self) -> None:
        try:
            self.also()
            from dfdoctor.launch.orchestrate import checks_of
            from dfdoctor.agent import ship
            self.loaded = checks_of("pre", *self.key)
            ship.bundle("probe")  # made once, before the workers fork: each made its own (0.015 s of CPU apiece)
            ship.bundle("relay")  # and the relay's, before its session is opened (0.01-0.03 s on the way there)
        except Exception:  # loaded again where they are needed, which says what failed
            self.loaded = None


_loading: Optional[_Loading] = None
_relay_wanted = False


def load_meanwhile(only: tuple, skip: tuple, also: Callable[[], Any] = lambda: None) -> None:
    """Start importing the pre-launch checks of `only`/`skip` (`loaded` takes them), after calling `also` (what
    else the caller needs imported before its start: the placement's module, which imports this one); the
    relay is wanted for their probes (`relay_meanwhile`)."""
    global _loading, _relay_wanted
    _loading = _Loading(tuple(only), tuple(skip), also)
    _relay_wanted = True


@contextlib.contextmanager
def relay_meanwhile(ctx: Any) -> Iterator[Callable[[], None]]:
    """Around the launch's shared connection, where its checks run: the relay that carries their probes
    (targets/relay.py) is prepared before ssh logs in, and opened by the `connected` this yields (called once the
    connection is up), while the checks are still being imported; it runs target.reachable's ping first. It is
    ended when the checks have all finished (`PreChecks`), and at the latest when the block ends."""
    global _relay_wanted
    # a relay rides on the shared ssh connection: kinds reached otherwise (lxc, docker) hold none
    wanted, _relay_wanted = _relay_wanted and ctx.target.kind_class.reached_over_ssh, False
    python = ctx.python or "python3"

    def connected() -> None:
        if wanted:
            from dfdoctor.targets.ping import ping_argv
            relay.open_for(ctx.target, python, ping=tuple(ping_argv(python)))

    if wanted:
        relay.prepare()
    try:
        yield connected
    finally:
        relay.close()


def loaded(only: tuple, skip: tuple) -> Optional[tuple[list, list]]:
    """The checks `load_meanwhile` imported for the same `only`/`skip` (with the broken plugins' records), once
    imported; None when nothing was started for them (or it failed)."""
    global _loading
    loading, _loading = _loading, None
    if loading is None:
        return None
    loading.thread.join()
    return loading.loaded if loading.key == (tuple(only), tuple(skip)) else None
