"""target.reachable: can dfdoctor reach the `--target`, and is there a python there to run its probes?"""

from __future__ import annotations

from typing import Iterator

from dfdoctor import causes
from dfdoctor.model import Result, fail, ok, skip
from dfdoctor.probe import reach_fix, run_on_target
from dfdoctor.registry import check
from dfdoctor.targets import parse_target

PING = 'echo dfdoctor-ping; command -v "$1" || echo "no-python:$1"'


@check("target.reachable", title="The target answers", phases=("pre", "post"), timeout=20)
def target_reachable(ctx) -> Iterator[Result]:
    """Run one tiny command on the target: a dead host or a missing interpreter is said in the tool's own words."""
    target = parse_target(ctx.target)
    if target.is_local:
        yield skip("the target is this machine")
        return
    python = ctx.python or "python3"
    out = run_on_target(ctx, ["sh", "-c", PING, "sh", python], timeout=15)
    words = out.extra.get("transport_error") or out.spawn_error
    if out.timed_out:
        yield fail(f"{target.describe()} did not answer within 15 s", causes.TARGET_UNREACHABLE,
                   details=out.stderr.strip()[-500:],
                   fix="Check that the host is up and that `ssh HOST true` returns at once (no password prompt: "
                       "dfdoctor runs ssh with BatchMode=yes).")
        return
    if words or "dfdoctor-ping" not in out.stdout:
        yield fail(f"cannot reach {target.describe()}: {words or out.stderr.strip()[-300:] or 'no answer'}",
                   causes.TARGET_UNREACHABLE,
                   details=f"command: {' '.join(out.argv[:12])} ... (exit {out.returncode})",
                   evidence=tuple(out.stderr.strip().splitlines()[-3:]),
                   fix=reach_fix(target))
        return
    if f"no-python:{python}" in out.stdout:
        yield fail(f"no {python} on {target.describe()}: dfdoctor's probes run in the target's python",
                   fix="Pass --python with the training interpreter's path on the target.")
        return
    yield ok(f"{target.describe()} answers in {out.duration_s:.2f} s; python: {out.stdout.split()[-1]}",
             data={"target": str(target), "python": out.stdout.split()[-1], "seconds": round(out.duration_s, 3)})

