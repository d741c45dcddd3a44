"""`dfdoctor check` here or on a --target: every registered check, the launch pipeline left unloaded. It was
recorded.py's, whose imports (the recorder, the watch, the run folders and the verdict's rules) are half of
what `check` imported without ever running (0.04 CPU-s of each `check`'s start, round 14)."""

from __future__ import annotations

from typing import Any

from dfdoctor.engine import choose_checks, run_phase, target_connection_meanwhile


def check(ctx: Any, only: tuple[str, ...], skip: tuple[str, ...], cfg: Any) -> list:
    """`dfdoctor check`: every registered check; with some that import torch, their server starts before the
    checks are chosen, and ssh logs in to a --target meanwhile."""
    from dfdoctor import probe_server  # start-up: it is the check command's alone
    with probe_server.early(ctx, wanted=not ctx.only), target_connection_meanwhile(ctx) as ready:
        checks, broken = choose_checks({"only": only, "skip": skip}, cfg, "pre")
        ready()
        return broken + run_phase(ctx, checks, "pre", cfg)
