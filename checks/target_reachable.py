"""target.reachable: can dfdoctor reach the `--target`, and is there a python there to run its probes?

On this machine there is nothing to reach, except on a Slurm node (`check --slurm-nodes`): there the same tiny
command reports the node's kernel, driver and /dev/shm, so the rows of an allocation can be told apart by them."""

from __future__ import annotations

from typing import Iterator, Optional

from dfdoctor import causes
from dfdoctor.command import ProbeOutcome
from dfdoctor.model import Result, fail, ok
from dfdoctor.probe import reach_fix, run_on_target
from dfdoctor.registry import check
from dfdoctor.targets import relay, transport
from dfdoctor.targets.ping import PING, ping_argv  # noqa: F401  (PING: read here by tests and readers)


def answer(stdout: str) -> tuple[str, dict[str, str]]:
    """The interpreter's path and the facts from PING's output."""
    lines = stdout.splitlines()
    after = lines[lines.index("dfdoctor-ping") + 1:] if "dfdoctor-ping" in lines else lines
    python = next((ln.strip() for ln in after if ln.strip() and not ln.startswith(("fact:", "no-python:"))), "")
    facts = {}
    for ln in after:
        if ln.startswith("fact:") and "=" in ln:
            key, _, value = ln[5:].partition("=")
            facts[key] = value.strip() or "unknown"
    return python, facts


# How long the relay's ping is waited for: it normally comes as the relay starts (0.1-0.3 s after the connection);
# one that does not (a hung `df /dev/shm`) leaves the check's own round trip its 15 s within the check's 20.
PING_WAIT_S = 4.0


def _pinged(ctx, python: str) -> Optional[ProbeOutcome]:
    """The ping this run's relay ran first on the target (targets/relay.py), where it answered: its seconds are
    those from the relay's session start to its answer. None (the check's own round trip) for anything else."""
    said = relay.ping(ctx.target, python, wait_s=PING_WAIT_S) if not ctx.target.runs_here else None
    if not said or said.get("rc") != 0 or said.get("timed_out"):
        return None
    out = ProbeOutcome(transport.wrap(ctx.target, ping_argv(python)), 0, relay.text(said["out"]),
                       relay.text(said["err"]), said["seconds"])
    return out if "dfdoctor-ping" in out.stdout else None


def _here(ctx) -> Optional[str]:
    """This machine (outside a Slurm node's srun) needs no answer from a target."""
    if ctx.target.runs_here and not ctx.env.get("SLURMD_NODENAME"):
        return "the target is this machine"
    return None


@check("target.reachable", title="The target answers", phases=("pre", "post"), timeout=20, not_applicable=_here)
def target_reachable(ctx) -> Iterator[Result]:
    """Run one tiny command on the target: a dead host or a missing interpreter is said in the tool's own words."""
    target = ctx.target
    node = ctx.env.get("SLURMD_NODENAME") if target.runs_here else None
    where = f"Slurm node {node}" if node else target.describe()
    python = ctx.python or "python3"
    out = _pinged(ctx, python) or run_on_target(ctx, ping_argv(python), timeout=15)
    words = out.extra.get("transport_error") or out.spawn_error
    if out.timed_out:
        yield fail(f"{target.describe()} did not answer within 15 s", causes.TARGET_UNREACHABLE,
                   details=out.stderr.strip()[-500:],
                   fix="Check that it is up and answers at once. " + reach_fix(target))
        return
    if words or "dfdoctor-ping" not in out.stdout:
        yield fail(f"cannot reach {target.describe()}: {words or out.stderr.strip()[-300:] or 'no answer'}",
                   causes.TARGET_UNREACHABLE,
                   details=f"command: {' '.join(out.argv[:12])} ... (exit {out.returncode})",
                   evidence=tuple(out.stderr.strip().splitlines()[-3:]),
                   fix=reach_fix(target))
        return
    found, facts = answer(out.stdout)
    missing = f"no-python:{python}" in out.stdout
    if missing and not found.startswith("/"):
        yield fail(f"no {python} on {where}: dfdoctor's probes run in the target's python",
                   fix="Pass --python with the training interpreter's path on the target.")
        return
    note = f" ({python} is not there)" if missing else ""
    yield ok(f"{where} answers in {out.duration_s:.2f} s; python: {found}{note}",
             data={"target": str(target), "python": found, "seconds": round(out.duration_s, 3),
                   "environment": {"target_python": found, **facts}})

