"""dfdoctor started with a terminal's signals ignored (under `nohup`: SIGHUP; as a script's background job: SIGINT
and SIGQUIT), as a test runner or a CI step may start it: the sessions it starts to see what a terminal does to a
job still get a terminal's dispositions. Inherited, a plain `&` survived the hang-up that kills it from a terminal
(the tty trial of the lxc probe said "survives"; the rehearsal saw the job die of EIO, not SIGHUP)."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from dfdoctor.rehearse.runner import rehearse
from dfdoctor.targets import parse_target, persistence
from dfdoctor.terminal_signals import TERMINAL, ignored_here
from infra.fixtures import Infra, infra  # noqa: F401


@contextmanager
def ignoring_a_terminals_signals() -> Iterator[None]:
    """This process ignores SIGHUP, SIGINT and SIGQUIT, as one started by `nohup ... &` from a script does."""
    before = {s: signal.getsignal(s) for s in TERMINAL}
    try:
        for s in TERMINAL:
            signal.signal(s, signal.SIG_IGN)
        assert len(ignored_here()) == len(TERMINAL)
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_a_rehearsed_plain_background_job_dies_of_the_hangup_under_nohup(tmp_path: Path):
    (tmp_path / "train.py").write_text("print('never run')\n")
    with ignoring_a_terminals_signals():
        r = rehearse(f"python3 -u {tmp_path}/train.py & sleep 0.5")
    p = r.job_place
    assert r.started and not r.alive and p.end and p.end.get("how") == "signal", (p, r.output)


def test_the_lxc_tty_trial_of_a_plain_background_job_dies_under_nohup(infra: Infra):
    with ignoring_a_terminals_signals():
        out = persistence.run(parse_target(f"lxc://{infra.vmid}"), ttys=(True,), pauses=(0.0,), only=["amp"])
    assert [(r["strategy"], r["survived"]) for r in out.matrix] == [("amp", "no")], out.matrix
