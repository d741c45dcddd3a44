"""The signal dispositions a session started from a user's terminal has: SIGHUP, SIGINT and SIGQUIT at their
defaults. A process inherits the ones its parent ignored, so dfdoctor run under `nohup` (SIGHUP ignored) or as a
background job of a script (`cmd &` without job control: SIGINT and SIGQUIT ignored) would pass them on to the
sessions it starts to see what a terminal does to a job: a plain `&` then survived the hang-up that kills it from
a terminal, and a held-open line shrugged off the Ctrl-C that ends it."""

from __future__ import annotations

import signal
from typing import Callable, Optional

TERMINAL = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)


def ignored_here() -> list[signal.Signals]:
    """The terminal's signals this process ignores (inherited: dfdoctor never ignores them itself)."""
    return [s for s in TERMINAL if signal.getsignal(s) == signal.SIG_IGN]


def _defaults() -> None:  # in the child, between fork and exec: no lock, no allocation beyond the calls
    for s in TERMINAL:
        signal.signal(s, signal.SIG_DFL)


def as_from_a_terminal(then: Optional[Callable[[], None]] = None) -> Optional[Callable[[], None]]:
    """A `preexec_fn` that gives the child a terminal's dispositions, then calls `then`; None where nothing is
    ignored here and there is nothing to call (the common case: no code runs between fork and exec)."""
    if not ignored_here():
        return then

    def child() -> None:
        _defaults()
        if then is not None:
            then()

    return child
